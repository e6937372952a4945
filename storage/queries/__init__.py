"""Query functions, grouped by table family; each takes `session` keyword-only."""
