#!/bin/bash
# Stop what one-node.sh started, by PID file: SIGTERM, then SIGKILL after 10 s.
SLURM_DIR=${SLURM_DIR:-/tmp/paika-slurm}
S=${SLURM_DIR}
for f in "$S/run/slurmd.pid" "$S/run/slurmctld.pid" "$S/run/slurmdbd.pid"; do
  [ -f "$f" ] || continue
  pid=$(cat "$f"); kill "$pid" 2>/dev/null || continue
  for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
  if kill -0 "$pid" 2>/dev/null; then kill -9 "$pid"; echo "SIGKILL $pid ($f)"; else echo "stopped $pid ($f)"; fi
done
