"""scheduler/: paika decides and acts. The floor plan, from the top (each floor may import the
floors below it, never above; import-linter's contracts in pyproject.toml hold the arrows that
are already straight, and no package or module here is in an import cycle):

The running service — every loop and thread of `paika up`:
    runner (builds the cycle), cycle (poll → policy → starts and stops, each cycle),
    periodic (the daily and hourly work), serving (HTTP servers), demo.
The daily rhythm: alerts/, digest/, archive/ (the team's memory in the object store).
The door the faces use: app (`Paika`: parse, guard, run, answer), commands (each /gpu path's
    handler), results (what a command answers), service/ (the operations, records not rows),
    configs/ (versions of the policy), doctor and starting_policy (`paika doctor`, `paika init`).
Notices: notices/ (one outbox; every message paika sends goes through it).
Executors: hosts/ (the GPU host agents: poll, inventory, reconcile), slurm/, dispatch (what a
    start or stop order is, and why a host refused it), pools (which executor runs which hosts).
The core: config, settings, errors, clock, lifecycle (a job's states), ledger (GPU-hours,
    cost, quotas' use), outputs, snapshots (the policy's view of the database), decision_log,
    credentials (agents' tokens), account_map, holds (starts a host refused for good),
    checkup (doctor's findings), races (work run again when it lost a race), collector.
The ground: policy/ (pure: a snapshot and `now` in, decisions out), grammar/ (the /gpu parser),
    agent/ (the GPU host agent, a program of its own: it imports no other part of paika).
Beside the house: simulate/ (traces through the real policy), deploy/ and examples/ (files).

Where to add —
    a /gpu command: its grammar in grammar/spec.py, its operation in service/, its handler in
        commands.HANDLERS, its result's words in bot/ (console.py and blocks/replies.py);
    a kind of notice: notices/kinds.py and its words in bot/notice_words.py;
    an executor: beside hosts/ and slurm/, chosen in pools.py (one contract for executors is
        issue 30's next step; today the cycle asks pools which one runs a host).
"""
