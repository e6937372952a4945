"""scheduler/: paika decides and acts. The floor plan, from the top: each floor imports only
the floors below it (the "floors" contract in pyproject.toml holds every arrow, and the
"acyclic" one keeps the modules of a floor from going round in circles):

1. The running service, every loop and thread of `paika up`: running (the one owner of its
   parts: their start and stop order, bounds, where each waits), runner (builds the cycle), cycle
   (poll → policy → starts and stops), periodic (the daily and hourly work), serving (HTTP
   servers), observe (metrics, health), demo; and simulate (traces through the real policy).
2. The door the faces use: door (the one module a face takes the core from: `Paika`, every
   record and value a face draws; the "faces-door" contract), over app (`Paika`: parse,
   guard, run, answer; also the alerts' buttons; `SlackDoor`: what only Slack asks), commands
   (each /gpu path's handler), doctor and starting_policy (`paika doctor`, `paika init`).
3. The daily rhythm: alerts/, digest/, archive/ (the team's memory in the object store).
4. The operations: service/ (records, not rows), results (what a command answers), configs/
   (the policy's versions).
5. Executors: executors (the contract every executor keeps, and their registry), hosts/ (the
   GPU host agents: poll, inventory, reconcile), slurm/, pools (the lookup of each host's
   executor, by its pool), holds (starts a host refused for good).
6. dispatch: what a start or stop order is, and why a host refused it.
7. notices/: one outbox; every message paika sends goes through it.
8. The core: config, settings, clock, lifecycle (a job's states), ledger (GPU-hours, cost,
   quotas' use), outputs, snapshots (the policy's view of the database), fingerprints (how a
   job uses a card, from its earlier runs), decision_log, credentials (agents' tokens),
   account_map, checkup (doctor's findings), races (work run again when it lost a race),
   collector.
9. The ground floor: grammar/ (the /gpu parser), errors, agent/ (the GPU host agent, a
   program of its own: it imports nothing else of paika).
10. The foundation: policy/ (pure: a snapshot and `now` in, decisions out; it imports nothing
   else of paika). Its priority_classes (core > normal > idle) is the one type every floor,
   storage's column aside, and the faces name the classes by; the grammar offers them from it.
Beside the house: deploy/ and examples/ (files).

Where to add —
    a /gpu command: its grammar in grammar/spec.py, its operation in service/, its handler in
        commands.HANDLERS, its result type in door.__all__ (the faces import nothing else of
        scheduler/ but results, grammar and errors), its words in bot/ (console.py and
        blocks/replies.py: a test fails when one face lacks a result's form);
    a kind of notice: notices/kinds.py, and its words in bot/notice_words.py;
    an executor: a package of its own on the executors' floor beside hosts/ and slurm/ (its
        `Executor` and its pool settings' model) and one `executors.register` call; a pool
        of the policy file then names it (tests/paika_test_executors.py has a toy one).
"""
