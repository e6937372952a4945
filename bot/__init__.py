"""paika: the Slack layer (commands, modals, Home tab, buttons)."""
