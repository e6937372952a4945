"""`paika simulate`: replay a public GPU-cluster trace through the real policy code.

The policy (`scheduler.policy`) is called exactly as the live scheduler calls it, with
simulated time. `traces` reads the trace files, `draw` fills in what a trace lacks
(priority class, data readiness, estimates, users, teams), `engine` replays the events,
and `metrics` turns the outcome into the JSON summary.
"""
