"""The team's memory in the object store: what is archived, when, and how it is read back."""
