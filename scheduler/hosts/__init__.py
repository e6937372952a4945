"""GPU hosts run by paika's own agents: polling them (poll.py), the inventory of hosts and
cards (inventory.py), reconciling jobs with what the hosts report (reconcile.py, for every
executor's reports), and the agents as an executor (executor.py, the contract in
scheduler/executors.py)."""
