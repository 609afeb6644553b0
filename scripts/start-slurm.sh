#!/usr/bin/env bash
# Starts a one-node Slurm cluster on this machine (as root) for the Slurm executor's
# tests: munged, a MariaDB server, slurmdbd, slurmctld and slurmd as daemons, this host
# the only node, job accounting on (so `sacct -j ID` lists every job). Idempotent:
# writes /etc/slurm/slurm.conf and /etc/slurm/slurmdbd.conf only when absent or ones
# this script wrote (a site's own slurm.conf is used as it is, and then accounting is
# left as that file sets it), starts only the daemons not running, restarts slurmdbd or
# slurmctld/slurmd only when the file each reads changed (slurmdbd by its pid file,
# slurmctld with `scontrol shutdown`; nothing by name), resumes a drained node, and
# waits until sinfo shows the node usable. The database password for slurmdbd is made
# once and kept only in slurmdbd.conf (root, mode 600); it is never printed.
# How stackmatrix reads a job's end (sacct, else scontrol): docs/executors.md.
set -euo pipefail

conf=/etc/slurm/slurm.conf
dbdconf=/etc/slurm/slurmdbd.conf
dbpid=/run/mysqld/stackmatrix-mariadb.pid
dbdpid=/run/slurmdbd.pid
changed=
dbd_changed=
accounting=
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

# the file is replaced only when its text changes; prints "changed" when it did
install_file() { # path mode tmpfile
    chmod "$2" "$3"
    if [[ -e $1 ]] && cmp -s "$3" "$1"; then
        rm -f "$3"
    else
        mv -f "$3" "$1"
        echo changed
    fi
}

if [[ -e $conf ]] && ! grep -qxF "$marker" "$conf"; then
    echo "start-slurm: $conf exists and was not written by this script; using it as it is"
else
    accounting=1
    for tool in slurmdbd sacctmgr sacct mariadbd mariadb mariadb-admin mysql_install_db; do
        command -v "$tool" >/dev/null 2>&1 || {
            echo "start-slurm: $tool not found; install Debian's slurmdbd and mariadb-server" >&2
            exit 1
        }
    done
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
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=$node
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
    [[ -z $(install_file "$conf" 644 "$tmp") ]] || changed=1
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
# the live process a pid file names, when its command is the one expected
pid_of() { # pidfile command
    local pid
    pid=$(cat "$1" 2>/dev/null || true)
    [[ $pid =~ ^[0-9]+$ ]] && [[ $(cat "/proc/$pid/comm" 2>/dev/null) == "$2" ]] && echo "$pid"
}
running munged || { su -s /bin/sh munge -c /usr/sbin/munged 2>/dev/null || /usr/sbin/munged --force; }

db_alive() { timeout 10 mariadb-admin --connect-timeout=5 ping >/dev/null 2>&1; }
start_db() {
    db_alive && return 0
    mkdir -p /run/mysqld /var/log/mysql
    chown mysql:mysql /run/mysqld /var/log/mysql
    if [[ ! -d /var/lib/mysql/mysql ]]; then
        mysql_install_db --user=mysql --datadir=/var/lib/mysql >/var/log/mysql/install.log 2>&1
    fi
    # no systemd here: setsid detaches the server; its output goes to a file, not our pipes
    setsid mariadbd --user=mysql --pid-file="$dbpid" \
        </dev/null >>/var/log/mysql/stackmatrix-mariadbd.log 2>&1 &
    for _ in $(seq 1 60); do
        db_alive && return 0
        sleep 1
    done
    echo "start-slurm: the MariaDB server did not answer; see /var/log/mysql/" >&2
    exit 1
}

# slurmdbd.conf: the database password is made once, then read back from the file
write_dbd_conf() {
    local pass=
    if [[ -e $dbdconf ]] && ! grep -qxF "$marker" "$dbdconf"; then
        echo "start-slurm: $dbdconf exists and was not written by this script; using it as it is"
        return 0
    fi
    [[ -e $dbdconf ]] && pass=$(sed -n 's/^StoragePass=//p' "$dbdconf")
    [[ -n $pass ]] || pass=$(head -c 48 /dev/urandom | base64 -w0 | tr -dc 'A-Za-z0-9')
    # the server's root is reached through its unix socket; the password goes on stdin
    mariadb --batch <<SQL
CREATE DATABASE IF NOT EXISTS slurm_acct_db;
CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$pass';
ALTER USER 'slurm'@'localhost' IDENTIFIED BY '$pass';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';
SQL
    local tmp
    tmp=$(umask 077 && mktemp /etc/slurm/.slurmdbd.conf.XXXXXX)
    cat >"$tmp" <<CONF
$marker
AuthType=auth/munge
DbdHost=localhost
DbdPort=6819
SlurmUser=root
PidFile=$dbdpid
LogFile=/var/log/slurm/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageLoc=slurm_acct_db
StorageUser=slurm
StoragePass=$pass
CONF
    chown root:root "$tmp"
    [[ -z $(install_file "$dbdconf" 600 "$tmp") ]] || dbd_changed=1
}

start_dbd() {
    local pid clusters
    pid=$(pid_of "$dbdpid" slurmdbd || true)
    if [[ -n $pid && -n $dbd_changed ]]; then
        echo "start-slurm: $dbdconf changed; restarting slurmdbd"
        kill -TERM "$pid"
        for _ in $(seq 1 30); do
            [[ -d /proc/$pid ]] || break
            sleep 1
        done
        pid=
    fi
    [[ -n $pid ]] || running slurmdbd || slurmdbd
    local answered=
    for _ in $(seq 1 60); do
        clusters=$(timeout 15 sacctmgr -n -P show cluster format=Cluster 2>/dev/null) &&
            answered=1 && break
        sleep 1
    done
    if [[ -z $answered ]]; then
        echo "start-slurm: slurmdbd does not answer sacctmgr; see /var/log/slurm/slurmdbd.log" >&2
        exit 1
    fi
    if ! grep -qxF stackmatrix <<<"$clusters"; then
        timeout 30 sacctmgr -i add cluster stackmatrix >/dev/null
    fi
}

if [[ -n $accounting ]]; then
    start_db
    write_dbd_conf
    start_dbd
fi

if [[ -n $changed ]] && running slurmctld; then
    # some settings (AuthInfo, accounting) are read only at start: restart on a new config
    echo "start-slurm: $conf changed; restarting slurmctld and slurmd"
    scontrol shutdown >/dev/null 2>&1 || true
    for _ in $(seq 1 30); do
        running slurmctld || running slurmd || break
        sleep 1
    done
fi
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
