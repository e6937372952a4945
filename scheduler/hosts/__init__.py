"""GPU hosts: polling their agents, keeping the inventory, reconciling jobs with reality."""
