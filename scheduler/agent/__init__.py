"""The paika host agent: a small HTTP JSON service on every GPU host.

It reports the host's GPUs (NVML, or simulated ones) and starts and stops jobs for the
scheduler. Modules, from the wire inwards:

    client.py     AgentClient / AsyncAgentClient: what the scheduler uses
    protocol.py   request and response dataclasses shared by client and server
    app.py        build_app(): the Starlette application under /v1/
    body.py       request bodies within bounds: size (413) and JSON nesting (400)
    command.py    `paika agent` and serve_in_thread()
    jobs.py       JobStore: processes, logs, stop with grace, state that survives restarts
    wrapper.py    runs a job's command and records its exit code in a file
    gpus.py       the GpuReader protocol; nvml.py and simulated.py implement it
    errors.py     AgentError and friends

Nothing here does work at import time, and only nvml.py imports pynvml (lazily).
"""
