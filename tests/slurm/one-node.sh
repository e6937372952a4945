#!/bin/bash
# A real one-node Slurm 22.05 (Debian's packages) with fake GPUs, for the tests: slurmctld and
# slurmd as plain processes (no systemd, no cgroups), 2 `a100` and 2 `t4` GPUs declared as GRES,
# each card cut into SHARDS_PER_GPU (8) typed shards (gres/shard) for jobs that share a card
# (SHARDS_PER_GPU=0: none).
# WITH_DBD=1 adds slurmdbd on the MariaDB at 127.0.0.1:3306 (root, no password), for sacct.
# Knobs for a second, larger one beside it (bench/slurm_cycle.py): SLURM_DIR, SLURM_CLUSTER,
# SLURMCTLD_PORT and SLURMD_PORT (two Slurms on one machine need their own), A100_GPUS,
# T4_GPUS, NODE_CPUS and NODE_MEMORY_MB (the node's declared size: one CPU and 100 MB a job).
# Runs as root. Idempotent: what is installed is not installed again, a daemon that runs is not
# started again, and a Slurm whose node already answers is left as it is.
# Use it with:  export SLURM_CONF=$SLURM_DIR/etc/slurm.conf
set -euo pipefail
SLURM_DIR=${SLURM_DIR:-/tmp/paika-slurm}
WITH_DBD=${WITH_DBD:-0}
SLURM_CLUSTER=${SLURM_CLUSTER:-paika-test}
SLURMCTLD_PORT=${SLURMCTLD_PORT:-6817}
SLURMD_PORT=${SLURMD_PORT:-6818}
A100_GPUS=${A100_GPUS:-2}
T4_GPUS=${T4_GPUS:-2}
NODE_CPUS=${NODE_CPUS:-32}
NODE_MEMORY_MB=${NODE_MEMORY_MB:-8000}
SHARDS_PER_GPU=${SHARDS_PER_GPU:-8}
GPUS=$((A100_GPUS + T4_GPUS))
S=${SLURM_DIR}
export SLURM_CONF=$S/etc/slurm.conf

node_up() { [ -f "$SLURM_CONF" ] && sinfo -h -N -o %T 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; }
alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

if command -v sinfo >/dev/null && node_up && { [ "$WITH_DBD" != 1 ] || sacct -n -X -S now >/dev/null 2>&1; }; then
  echo "slurm: already up ($SLURM_CONF)"; exit 0
fi

packages=()
command -v slurmctld >/dev/null || packages+=(slurm-wlm)   # slurmctld, slurmd, the clients, munge
if [ "$WITH_DBD" = 1 ]; then
  command -v slurmdbd >/dev/null || packages+=(slurmdbd)
  command -v mariadb >/dev/null || packages+=(mariadb-client)
fi
if [ ${#packages[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${packages[@]}"
fi

mkdir -p "$S"/{etc,state,spool,log,run,fakedev}
# Slurm drops GPUs without a File=, and complains about files that are not character devices.
# Without cgroups nothing opens them: one device file per fake GPU is all they need.
for i in $(seq 0 $((GPUS - 1))); do
  [ -e "$S/fakedev/nvidia$i" ] || mknod "$S/fakedev/nvidia$i" c 195 "$i"
done

if [ "$WITH_DBD" = 1 ]; then
  ACCT="AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=6819
AccountingStorageTRES=gres/gpu,gres/gpu:a100,gres/gpu:t4
AccountingStoreFlags=job_comment"
  GATHER=JobAcctGatherType=jobacct_gather/linux
else
  ACCT=AccountingStorageType=accounting_storage/none
  GATHER=JobAcctGatherType=jobacct_gather/none
fi

# Shards: one gres.conf line per card (its File=), in the cards' order, so that the index
# Slurm gives a job's shards ("shard:a100:3(IDX:0)") is its card's.
GRES_TYPES=gpu
NODE_GRES=gpu:a100:$A100_GPUS,gpu:t4:$T4_GPUS
SHARD_LINES=
if [ "$SHARDS_PER_GPU" -gt 0 ]; then
  GRES_TYPES=gpu,shard
  NODE_GRES=$NODE_GRES,shard:a100:$((A100_GPUS * SHARDS_PER_GPU)),shard:t4:$((T4_GPUS * SHARDS_PER_GPU))
  for i in $(seq 0 $((GPUS - 1))); do
    type=a100; [ "$i" -lt "$A100_GPUS" ] || type=t4
    SHARD_LINES+="NodeName=localhost Name=shard Type=$type Count=$SHARDS_PER_GPU File=$S/fakedev/nvidia$i"$'\n'
  done
fi

# batch_sched_delay/sched_min_interval=0: jobs start at once, not on the next scheduling pass.
# DefMemPerCPU and config_overrides: 32 declared CPUs run many jobs on a small machine.
cat > "$S/etc/slurm.conf" <<EOF
ClusterName=$SLURM_CLUSTER
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$SLURMCTLD_PORT
SlurmdPort=$SLURMD_PORT
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$S/state
SlurmdSpoolDir=$S/spool
SlurmctldPidFile=$S/run/slurmctld.pid
SlurmdPidFile=$S/run/slurmd.pid
SlurmctldLogFile=$S/log/slurmctld.log
SlurmdLogFile=$S/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
$GATHER
MpiDefault=none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=100
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0
PriorityType=priority/multifactor
$ACCT
JobCompType=jobcomp/none
ReturnToService=2
MaxJobCount=20000
MinJobAge=300
KillWait=5
SlurmdParameters=config_overrides
GresTypes=$GRES_TYPES
NodeName=localhost CPUs=$NODE_CPUS Boards=1 SocketsPerBoard=1 CoresPerSocket=$NODE_CPUS ThreadsPerCore=1 RealMemory=$NODE_MEMORY_MB Gres=$NODE_GRES State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF

cat > "$S/etc/gres.conf" <<EOF
AutoDetect=off
NodeName=localhost Name=gpu Type=a100 File=$S/fakedev/nvidia[0-$((A100_GPUS - 1))]
NodeName=localhost Name=gpu Type=t4 File=$S/fakedev/nvidia[$A100_GPUS-$((GPUS - 1))]
$SHARD_LINES
EOF

if ! alive /run/munge/munged.pid; then
  mkdir -p /run/munge && chown munge:munge /run/munge
  runuser -u munge -- /usr/sbin/munged
fi

if [ "$WITH_DBD" = 1 ]; then
  SQL="mariadb -h 127.0.0.1 -P 3306 -u root"
  until $SQL -e 'select 1' >/dev/null 2>&1; do
    [ $((tries=${tries:-0}+1)) -le 60 ] || { echo "slurm: no MariaDB on 127.0.0.1:3306" >&2; exit 1; }
    sleep 0.5
  done
  # A fresh state dir numbers jobs from 1 again: its accounting starts afresh too, so that
  # sacct never mixes an earlier run's job with the same id.
  if [ ! -e "$S/state/job_state" ] && ! alive "$S/run/slurmdbd.pid"; then
    $SQL -e "DROP DATABASE IF EXISTS slurm_acct_db"
  fi
  $SQL -e "CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurmpw';
    CREATE DATABASE IF NOT EXISTS slurm_acct_db; GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1'; FLUSH PRIVILEGES;"
  cat > "$S/etc/slurmdbd.conf" <<EOF
AuthType=auth/munge
DbdHost=localhost
DbdPort=6819
SlurmUser=root
DebugLevel=info
LogFile=$S/log/slurmdbd.log
PidFile=$S/run/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=3306
StorageLoc=slurm_acct_db
StorageUser=slurm
StoragePass=slurmpw
EOF
  chmod 600 "$S/etc/slurmdbd.conf"
  # slurmdbd before slurmctld, or sacct shows wrong job names.
  alive "$S/run/slurmdbd.pid" || SLURM_CONF=$S/etc/slurm.conf /usr/sbin/slurmdbd
  for _ in $(seq 1 100); do
    sacctmgr -n list cluster format=cluster 2>/dev/null | grep -q "$SLURM_CLUSTER" && break
    sacctmgr -i add cluster "$SLURM_CLUSTER" >/dev/null 2>&1 && break
    sleep 0.2
  done
fi
# -i: a fresh state dir has no state files yet (the state is kept across restarts).
alive "$S/run/slurmctld.pid" || /usr/sbin/slurmctld -i
alive "$S/run/slurmd.pid" || /usr/sbin/slurmd -N localhost   # the node is "localhost", whatever the hostname
for _ in $(seq 1 60); do node_up && break; sleep 0.5; done
node_up || { echo "slurm: the node did not come up; see $S/log" >&2; sinfo -N -l >&2 || true; exit 1; }
sinfo -N -o "%N %T %c %m %G"
