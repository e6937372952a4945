"""The paika host agent: a small HTTP JSON service on every GPU host.

It reports the host's GPUs (NVML, or simulated ones) and starts and stops jobs for the
scheduler. Modules, from the wire inwards:

    client.py     AgentClient / AsyncAgentClient: what the scheduler uses; each request of
                  the API is described once (Endpoints) for both
    transport.py  LeanTransport: the poller's HTTP/1.1 keep-alive transport for httpx
    protocol.py   the wire format: pydantic models shared by client and server
    app.py        build_app(): the Starlette application under /v1/
    body.py       request bodies within bounds: size (413) and JSON nesting (400)
    command.py    `paika agent`: checks, builds the app and serves it with uvicorn
    bounded.py    uvicorn's h11 with head/body timeouts, a connection cap and its own TLS
                  (also for paika up's HTTP side, through scheduler.serving)
    address.py    where an agent listens: its default port, and loopback
    jobs.py       JobStore: processes, logs, stop with grace, state that survives restarts
    isolation.py  whom a job runs as (accounts, the root rules), its workdir, its cgroup
    wrapper.py    runs a job's command and records its exit code in a file
    gpus.py       the GpuReader protocol; nvml.py and simulated.py implement it
    errors.py     AgentError and friends

The package imports nothing from the rest of paika (tests/agent/test_agent_stands_alone.py
checks it): the rest of paika imports from here, never the other way. Nothing here does work
at import time, and only nvml.py imports pynvml (lazily).
"""
