#!/usr/bin/env bash
# A real single-machine Slurm for the tests (issue 46 item 2): Debian 12's munged, slurmctld and
# slurmd, started as root in a private folder, all on loopback, and stopped again.
#
#   slurm_cluster.sh start DIR   writes DIR/slurm.conf (and munge's key and socket), starts the
#                                three daemons, waits until the node is idle; prints
#                                SLURM_CONF=DIR/slurm.conf for the caller's environment
#   slurm_cluster.sh stop DIR    stops them by their pid files
#
# Nothing outside DIR is touched: the daemons run with -f/--key-file/--socket pointing into it,
# and the clients (sbatch, squeue, scancel, scontrol) find the cluster through $SLURM_CONF.
set -euo pipefail

cmd=${1:?usage: slurm_cluster.sh start|stop DIR}
dir=${2:?usage: slurm_cluster.sh start|stop DIR}
dir=$(cd "$dir" && pwd)

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

stop() {
  for d in slurmd slurmctld munged; do
    local pidfile="$dir/$d.pid"
    [ -f "$pidfile" ] || continue
    local pid
    pid=$(cat "$pidfile")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$pidfile"
  done
}

case "$cmd" in
  stop) stop; exit 0 ;;
  start) ;;
  *) echo "slurm_cluster.sh: unknown command $cmd" >&2; exit 2 ;;
esac

for tool in munged mungekey slurmctld slurmd sbatch scontrol; do
  command -v "$tool" >/dev/null || PATH=$PATH:/usr/sbin
  command -v "$tool" >/dev/null || { echo "slurm_cluster.sh: $tool not found (apt install slurmctld slurmd munge slurm-client)" >&2; exit 3; }
done
[ "$(id -u)" = 0 ] || { echo "slurm_cluster.sh: needs root (slurmd runs jobs as their user)" >&2; exit 3; }

chmod 700 "$dir"
mkdir -p "$dir/state" "$dir/spool" "$dir/munge"
chmod 700 "$dir/munge"
mungekey --create --keyfile "$dir/munge/munge.key" --force >/dev/null
chmod 600 "$dir/munge/munge.key"
munged --force --key-file "$dir/munge/munge.key" --socket "$dir/munge/munge.socket" \
  --pid-file "$dir/munged.pid" --log-file "$dir/munged.log" --seed-file "$dir/munge/munge.seed"

node=$(hostname -s)
cpus=$(nproc)
mem=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 / 2 ))
cat > "$dir/slurm.conf" <<EOF
ClusterName=lathe-test
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
MpiDefault=none
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
ReturnToService=2
KillWait=60
MinJobAge=600
JobRequeue=1
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=lathe Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
export SLURM_CONF=$dir/slurm.conf
slurmctld -f "$SLURM_CONF" -i
slurmd -f "$SLURM_CONF" -N "$node"
for _ in $(seq 1 100); do
  state=$(sinfo -h -N -o '%t' 2>/dev/null | head -n1 || true)
  case "$state" in idle|mix|alloc) echo "SLURM_CONF=$SLURM_CONF"; exit 0 ;; esac
  sleep 0.2
done
echo "slurm_cluster.sh: the node did not come up (state '${state:-none}'); logs in $dir" >&2
tail -n 20 "$dir/slurmctld.log" "$dir/slurmd.log" >&2 || true
stop
exit 1
