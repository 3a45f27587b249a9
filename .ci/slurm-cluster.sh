#!/usr/bin/env bash
# A real Slurm cluster on one machine, for tests: munged, slurmctld and two slurmd (nodes n1, n2)
# on loopback, every file under one directory, nothing in /etc touched.
#
#   .ci/slurm-cluster.sh start DIR    # start; prints `export ...` lines (also in DIR/env.sh)
#   .ci/slurm-cluster.sh stop DIR     # cancel jobs, stop the daemons and every job process
#   .ci/slurm-cluster.sh status DIR
#
# Each daemon runs in its own UTS and mount namespace (unshare), so each node has its own host
# name: a job step on n2 sees hostname n2, as on a real cluster, and the harness's records name
# two hosts. In every namespace DIR/hosts is bind-mounted on /etc/hosts, so n1, n2 and ctl
# resolve to 127.0.0.1; the network itself is the machine's loopback, shared. Ports are free ones
# picked at start, so several clusters (concurrent test runs) can coexist.
# Needs root, unshare (util-linux) and Debian's slurm-wlm and munge:
#   apt-get install slurm-wlm munge
set -euo pipefail

NODES=(n1 n2)

usage() { sed -n '2,16p' "$0" >&2; exit 2; }
log() { printf '[slurm-cluster %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

[ $# -eq 2 ] || usage
ACTION=$1
DIR=$(mkdir -p "$2" && cd "$2" && pwd)

need() {
    [ "$(id -u)" = 0 ] || { echo "slurm-cluster: needs root (slurmd runs jobs as their user)" >&2; exit 3; }
    for tool in munged slurmctld slurmd sbatch scontrol unshare; do
        command -v "$tool" >/dev/null || { echo "slurm-cluster: $tool is not installed (apt-get install slurm-wlm munge)" >&2; exit 3; }
    done
}

free_ports() {
    python3 - "$1" <<'EOF'
import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))
EOF
}

# Run a daemon in the foreground, detached, in a UTS + mount namespace of its own named $1.
in_namespace() {
    local name=$1 log=$2
    shift 2
    # shellcheck disable=SC2016 # expanded by the inner sh, from its arguments
    setsid unshare --uts --mount --propagation private -- sh -c '
        mount --bind "$0/hosts" /etc/hosts && hostname "$1" && shift && exec "$@"' "$DIR" "$name" "$@" \
        >>"$log" 2>&1 </dev/null &
    echo $! >"$DIR/run/$name.pid"
}

wait_for() {
    local what=$1 seconds=$2
    shift 2
    for _ in $(seq $((seconds * 5))); do
        if "$@" >/dev/null 2>&1; then return 0; fi
        sleep 0.2
    done
    log "timed out waiting for $what"
    return 1
}

start() {
    need
    if [ -f "$DIR/env.sh" ] && status >/dev/null 2>&1; then
        log "already running in $DIR"; cat "$DIR/env.sh"; return
    fi
    rm -rf "${DIR:?}"/{etc,log,run,spool,munge}
    mkdir -p "$DIR"/{etc,log,run,munge} "$DIR"/spool/{ctld,n1,n2}
    chmod 755 "$DIR/munge"
    read -r CTL_PORT N1_PORT N2_PORT < <(free_ports 3)
    printf '127.0.0.1\tlocalhost ctl %s\n' "${NODES[*]}" >"$DIR/hosts"

    # munge: our own key, socket and daemon (the machine's munged, if any, is left alone).
    dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 status=none
    chmod 400 "$DIR/munge/munge.key"
    munged --force --key-file="$DIR/munge/munge.key" --socket="$DIR/munge/munge.socket" \
        --pid-file="$DIR/run/munged.pid" --log-file="$DIR/log/munged.log" --seed-file="$DIR/munge/seed"
    wait_for munged 10 test -S "$DIR/munge/munge.socket"

    local cpus mem
    cpus=$(nproc)
    mem=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 / 4 ))
    cat >"$DIR/etc/slurm.conf" <<EOF
# Written by .ci/slurm-cluster.sh: a test cluster on loopback.
ClusterName=harnessci
SlurmctldHost=ctl(127.0.0.1)
SlurmctldPort=$CTL_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$DIR/munge/munge.socket
StateSaveLocation=$DIR/spool/ctld
SlurmdSpoolDir=$DIR/spool/%n
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd-%n.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd-%n.log
SlurmdDebug=info
SlurmctldDebug=info
# No cgroups, no accounting: nothing of the machine is configured for them.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
# Both "nodes" share this machine's cores and memory: trust the configuration over the probe.
SlurmdParameters=config_overrides
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
MinJobAge=60
NodeName=n1 NodeHostname=n1 NodeAddr=127.0.0.1 Port=$N1_PORT CPUs=$cpus RealMemory=$mem State=UNKNOWN
NodeName=n2 NodeHostname=n2 NodeAddr=127.0.0.1 Port=$N2_PORT CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
    printf 'export SLURM_CONF=%s\n' "$DIR/etc/slurm.conf" >"$DIR/env.sh"
    export SLURM_CONF=$DIR/etc/slurm.conf

    in_namespace ctl "$DIR/log/slurmctld.out" slurmctld -D -i -f "$SLURM_CONF"
    wait_for slurmctld 30 scontrol ping
    for node in "${NODES[@]}"; do
        in_namespace "$node" "$DIR/log/slurmd-$node.out" slurmd -D -f "$SLURM_CONF" -N "$node"
    done
    # shellcheck disable=SC2016 # expanded by the inner sh at each try
    if ! wait_for "nodes idle" 60 sh -c '[ "$(sinfo -h -N -o %t | sort -u | tr -d "\n")" = idle ]'; then
        sinfo -N >&2 || true
        tail -n 20 "$DIR"/log/*.log >&2 || true
        return 1
    fi
    log "cluster up in $DIR: nodes ${NODES[*]}, slurmctld on 127.0.0.1:$CTL_PORT"
    cat "$DIR/env.sh"
}

status() {
    export SLURM_CONF=$DIR/etc/slurm.conf
    scontrol ping && sinfo -N
}

# PIDs of every process in a namespace that one of our daemons made: the daemon, its slurmstepd
# and every job process under it. Only namespaces this script created are looked at.
namespace_pids() {
    local ns_file=$1 ns pid
    [ -f "$ns_file" ] || return 0
    ns=$(cat "$ns_file")
    for pid in /proc/[0-9]*; do
        [ "$(readlink "$pid/ns/uts" 2>/dev/null)" = "$ns" ] && echo "${pid#/proc/}"
    done
    return 0
}

stop() {
    export SLURM_CONF=$DIR/etc/slurm.conf
    if [ -f "$SLURM_CONF" ]; then
        scancel --quiet --full --cluster=harnessci -u root >/dev/null 2>&1 || scancel -u root >/dev/null 2>&1 || true
    fi
    local name pid pids=()
    # Record each daemon's namespace before signalling, then end everything in it.
    for name in ctl "${NODES[@]}"; do
        pid=$(cat "$DIR/run/$name.pid" 2>/dev/null || true)
        if [ -n "$pid" ] && [ -e "/proc/$pid" ]; then
            readlink "/proc/$pid/ns/uts" >"$DIR/run/$name.ns" 2>/dev/null || true
        fi
    done
    for name in ctl "${NODES[@]}"; do
        mapfile -t -O "${#pids[@]}" pids < <(namespace_pids "$DIR/run/$name.ns")
    done
    [ ${#pids[@]} -eq 0 ] || kill -TERM "${pids[@]}" 2>/dev/null || true
    for _ in $(seq 50); do
        pids=()
        for name in ctl "${NODES[@]}"; do
            mapfile -t -O "${#pids[@]}" pids < <(namespace_pids "$DIR/run/$name.ns")
        done
        [ ${#pids[@]} -eq 0 ] && break
        sleep 0.2
    done
    [ ${#pids[@]} -eq 0 ] || { log "killing ${#pids[@]} processes left"; kill -KILL "${pids[@]}" 2>/dev/null || true; }
    pid=$(cat "$DIR/run/munged.pid" 2>/dev/null || true)
    if [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = munged ]; then
        kill -TERM "$pid"
        for _ in $(seq 25); do [ -e "/proc/$pid" ] || break; sleep 0.2; done
    fi
    rm -f "$DIR/env.sh"
    log "cluster in $DIR stopped"
}

case "$ACTION" in
    start) start ;;
    stop) stop ;;
    status) status ;;
    *) usage ;;
esac
