"""Block Kit for every message, view and modal the bot sends, built by pure functions."""
