#!/usr/bin/env bash
# A one-node SLURM cluster on this machine, for trying and testing `python -m calibook paper --launch slurm`
# (book/cluster.md; tests/unit/calibook/gpu/test_cluster.py starts it when it can).
#
#   bash scripts/slurm-local.sh start    # writes slurm.conf, starts munged, slurmctld and slurmd; prints
#                                        # `export SLURM_CONF=...`, the line the SLURM commands need
#   bash scripts/slurm-local.sh status   # exit 0 when the cluster answers and its node takes jobs
#   bash scripts/slurm-local.sh stop     # stops the daemons this script started
#
# Needs root and Debian's packages (`apt-get install slurmctld slurmd slurm-client munge`; with
# --install, start installs them). Idempotent: a start finds a running cluster and only checks it.
# One node named after this host with all its CPUs, no GPUs (jobs run on the CPU: smoke scale),
# ProctrackType=proctrack/linuxproc and TaskPlugin=task/none (no cgroups), no accounting database
# (squeue sees the jobs; finished jobs are known by what submitit wrote). Everything it writes lives
# in $CALIBOOK_SLURM_DIR (default /tmp/calibook-slurm); /etc/slurm is left alone.
set -euo pipefail
DIR=${CALIBOOK_SLURM_DIR:-/tmp/calibook-slurm}
CONF=$DIR/slurm.conf
HOST=$(hostname -s)
action=${1:-start}
install=no
[ "${2:-}" = "--install" ] && install=yes

die() { echo "slurm-local: $*" >&2; exit 1; }

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

ready() {  # the controller answers and the node is idle or busy (not down or draining)
    SLURM_CONF=$CONF scontrol ping 2>/dev/null | grep -q "is UP" || return 1
    local state
    state=$(SLURM_CONF=$CONF sinfo -h -n "$HOST" -o %t 2>/dev/null | head -n1)
    case "$state" in idle* | mix* | alloc* | comp*) return 0 ;; *) return 1 ;; esac
}

write_conf() {
    local cpus
    cpus=$(nproc)
    mkdir -p "$DIR/state" "$DIR/slurmd"
    cat >"$CONF.new" <<EOF
# written by scripts/slurm-local.sh: a one-node cluster on $HOST ($cpus CPUs, no GPUs)
ClusterName=calibook
SlurmctldHost=$HOST
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=cred_expire=5
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2,bf_interval=1
JobRequeue=1
ReturnToService=2
MpiDefault=none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/slurmd
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/slurmctld.log
SlurmdLogFile=$DIR/slurmd.log
SlurmctldPort=6817
SlurmdPort=6818
MinJobAge=300
KillWait=5
NodeName=$HOST CPUs=$cpus State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF
    mv "$CONF.new" "$CONF"
}

start() {
    [ "$(id -u)" = 0 ] || die "needs root (the daemons run as root here)"
    if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v sbatch >/dev/null ||
        ! command -v munged >/dev/null; then
        [ "$install" = yes ] || die "SLURM is not installed (apt-get install slurmctld slurmd slurm-client munge, or: $0 start --install)"
        command -v apt-get >/dev/null || die "SLURM is not installed and there is no apt-get"
        pkgs=(slurmctld slurmd slurm-client munge)
        { DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${pkgs[@]}" ||
            { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${pkgs[@]}"; }; } \
            >"$DIR.apt.log" 2>&1 || die "apt-get could not install ${pkgs[*]} (log: $DIR.apt.log)"
    fi
    mkdir -p "$DIR"
    if alive "$DIR/slurmctld.pid" && alive "$DIR/slurmd.pid" && ready; then
        echo "export SLURM_CONF=$CONF"
        return 0
    fi
    # munge: the key the package made, its socket under /run/munge
    [ -f /etc/munge/munge.key ] || { mungekey --create 2>/dev/null || create-munge-key -f; } >/dev/null
    mkdir -p /run/munge /var/log/munge /var/lib/munge
    chown -R munge:munge /run/munge /var/log/munge /var/lib/munge /etc/munge 2>/dev/null || true
    if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
        if id munge >/dev/null 2>&1; then
            runuser -u munge -- munged --force || die "munged did not start (/var/log/munge/munged.log)"
        else
            munged --force || die "munged did not start (/var/log/munge/munged.log)"
        fi
        for _ in $(seq 50); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.1; done
        munge -n | unmunge >/dev/null 2>&1 || die "munge does not answer (/var/log/munge/munged.log)"
    fi
    write_conf
    alive "$DIR/slurmctld.pid" || slurmctld -f "$CONF" || die "slurmctld did not start (log: $DIR/slurmctld.log)"
    alive "$DIR/slurmd.pid" || slurmd -f "$CONF" || die "slurmd did not start (log: $DIR/slurmd.log)"
    for _ in $(seq 300); do
        ready && break
        # a node left down or draining by an earlier run comes back
        case "$(SLURM_CONF=$CONF sinfo -h -n "$HOST" -o %t 2>/dev/null | head -n1)" in
        down* | drain* | drng*) SLURM_CONF=$CONF scontrol update nodename="$HOST" state=resume >/dev/null 2>&1 || true ;;
        esac
        sleep 0.2
    done
    ready || die "the node did not become idle in 60 s (logs: $DIR/slurmctld.log, $DIR/slurmd.log)"
    echo "export SLURM_CONF=$CONF"
}

stop() {
    for d in slurmd slurmctld; do
        if alive "$DIR/$d.pid"; then
            pid=$(cat "$DIR/$d.pid")
            kill "$pid"
            for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        fi
    done
    echo "stopped (munged left running; its state is the system's)"
}

case "$action" in
start) start ;;
stop) stop ;;
status) ready && echo "up: export SLURM_CONF=$CONF" || { echo "not running" >&2; exit 1; } ;;
*) die "usage: $0 start [--install] | status | stop" ;;
esac
