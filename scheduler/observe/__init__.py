"""What `paika up` tells its operators: Prometheus metrics, the health check and the small
HTTP server that serves them where Slack's own server does not (Socket Mode, Slack off).

    watch.py    what the periodic work last did (cycle times, leadership), as plain values
    health.py   healthy or not, and why, from the watch and the cycle time
    metrics.py  the process's own Prometheus registry and its collectors
    http.py     GET /metrics and GET /healthz as Starlette routes, and a server for them
"""
