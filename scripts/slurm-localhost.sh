#!/bin/sh
# SPDX-License-Identifier: MIT
# Start a one-node Slurm on this machine (Debian 12: slurm-wlm, munge), for tests/check_srun.sh
# and for trying `srun nnt-train` without a cluster. Runs as root; writes /etc/slurm/slurm.conf
# (the previous one is kept as slurm.conf.nnt-save) and starts munged, slurmctld and slurmd.
#   apt-get install slurm-wlm munge && sudo scripts/slurm-localhost.sh && srun -n 2 hostname
#   sudo scripts/slurm-localhost.sh stop
set -e
if [ "${1:-start}" = stop ]; then
    pkill -x slurmd || true; pkill -x slurmctld || true; pkill -x munged || true
    i=0   # slurmctld saves its state before it ends
    while { pgrep -x slurmd || pgrep -x slurmctld || pgrep -x munged; } > /dev/null &&
          [ $i -lt 30 ]; do
        sleep 1; i=$((i + 1))
    done
    exit 0
fi
[ "$(id -u)" -eq 0 ] || { echo "slurm-localhost: run as root" >&2; exit 1; }
command -v slurmctld > /dev/null || { echo "slurm-localhost: no slurmctld (apt-get install slurm-wlm munge)" >&2; exit 1; }
host=$(hostname -s)
cpus=$(nproc)
mem=$(awk '/MemTotal/ { print int($2 / 1024 * 0.9) }' /proc/meminfo)
conf=/etc/slurm/slurm.conf
[ -e "$conf" ] && [ ! -e "$conf.nnt-save" ] && cp "$conf" "$conf.nnt-save"
mkdir -p /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /run/munge
chown slurm:slurm /var/spool/slurmctld /var/log/slurm
chown munge:munge /run/munge
cat > "$conf" <<CONF
# written by nnt's scripts/slurm-localhost.sh: one node, this machine
ClusterName=nnt-local
SlurmctldHost=$host
SlurmUser=slurm
AuthType=auth/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
NodeName=$host CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=local Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF
[ -s /etc/munge/munge.key ] || { dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 2> /dev/null; chown munge:munge /etc/munge/munge.key; chmod 400 /etc/munge/munge.key; }
# each daemon that is not running (again: one may have been ending when first looked at)
start_daemons() {
    pgrep -x munged > /dev/null || su -s /bin/sh munge -c /usr/sbin/munged || true
    pgrep -x slurmctld > /dev/null || slurmctld || true
    pgrep -x slurmd > /dev/null || slurmd || true
}
start_daemons
i=0
until timeout 5 sinfo -h -o %T 2> /dev/null | grep -q 'idle\|mix\|alloc'; do
    i=$((i + 1))
    if [ $i -gt 20 ]; then
        echo "slurm-localhost: the node did not come up (see /var/log/slurm)" >&2
        timeout 5 sinfo >&2
        exit 1
    fi
    sleep 1
    start_daemons
done
timeout 60 srun -n 1 true ||
    { echo "slurm-localhost: the node is up but srun -n 1 true failed (see /var/log/slurm)" >&2; exit 1; }
echo "slurm-localhost: node $host up ($cpus CPUs); srun works"
