"""paika's faces: Slack (commands, modals, Home tab, buttons), the console, and the `paika`
command line that wires paika together (`cli.py`)."""
