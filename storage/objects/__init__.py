"""The object store: the team's versioned memory (storage/objects/base.py says the interface)."""
