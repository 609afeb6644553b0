#!/usr/bin/env bash
# Starts a one-node Slurm cluster on this machine (as root) for the Slurm executor's
# tests: munged, slurmctld and slurmd as daemons, this host the only node. Idempotent:
# writes /etc/slurm/slurm.conf only when it is absent or one this script wrote, starts
# only the daemons not running, resumes a drained node, and waits until sinfo shows
# the node usable. No slurmdbd (it needs a database server): sacct has no records
# here, so stackmatrix reads a job's end from `scontrol show job`, kept MinJobAge
# seconds after the job ends (docs/executors.md).
set -euo pipefail

conf=/etc/slurm/slurm.conf
changed=
marker="# written by stackmatrix scripts/start-slurm.sh"
node=$(hostname -s)
cpus=$(nproc)

if [[ $(id -u) -ne 0 ]]; then
    echo "start-slurm: must run as root" >&2
    exit 1
fi
for tool in munged slurmctld slurmd sinfo scontrol; do
    command -v "$tool" >/dev/null 2>&1 || {
        echo "start-slurm: $tool not found; install Debian's slurm-wlm and munge" >&2
        exit 1
    }
done

if [[ -e $conf ]] && ! grep -qxF "$marker" "$conf"; then
    echo "start-slurm: $conf exists and was not written by this script; using it as it is"
else
    mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm
    tmp=$(mktemp /etc/slurm/.slurm.conf.XXXXXX)
    cat >"$tmp" <<CONF
$marker
ClusterName=stackmatrix
SlurmctldHost=$node
SlurmUser=root
AuthType=auth/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=/var/log/slurm/jobcomp.log
MinJobAge=3600
# a requeued job waits out the credential lifetime of its earlier run (120 s by default)
AuthInfo=cred_expire=30
ReturnToService=2
KillWait=10
SchedulerType=sched/backfill
MpiDefault=none
NodeName=$node CPUs=$cpus RealMemory=1024 State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP
CONF
    chmod 644 "$tmp"
    if [[ -e $conf ]] && cmp -s "$tmp" "$conf"; then
        rm -f "$tmp"
    else
        mv -f "$tmp" "$conf"
        changed=1
    fi
fi

if [[ ! -s /etc/munge/munge.key ]]; then
    mkdir -p /etc/munge
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
fi
chown munge:munge /etc/munge/munge.key 2>/dev/null || true
chmod 400 /etc/munge/munge.key
mkdir -p /run/munge /var/log/munge /var/lib/munge
chown munge:munge /run/munge /var/log/munge /var/lib/munge 2>/dev/null || true

running() { pgrep -x "$1" >/dev/null 2>&1; }
if [[ -n $changed ]] && running slurmctld; then
    # some settings (AuthInfo) are read only at start: restart the daemons on a new config
    echo "start-slurm: $conf changed; restarting slurmctld and slurmd"
    scontrol shutdown >/dev/null 2>&1 || true
    for _ in $(seq 1 30); do
        running slurmctld || running slurmd || break
        sleep 1
    done
fi
running munged || { su -s /bin/sh munge -c /usr/sbin/munged 2>/dev/null || /usr/sbin/munged --force; }
running slurmctld || slurmctld
running slurmd || slurmd

for _ in $(seq 1 60); do
    state=$(sinfo -h -n "$node" -o %T 2>/dev/null | head -n1 || true)
    case $state in
        drain* | drained* | down*)
            scontrol update NodeName="$node" State=RESUME >/dev/null 2>&1 || true ;;
        idle* | mixed* | allocated* | completing*)
            echo "start-slurm: node $node is $state"
            exit 0 ;;
    esac
    sleep 1
done
echo "start-slurm: node $node did not become usable (sinfo: ${state:-nothing}); see /var/log/slurm/" >&2
exit 1
