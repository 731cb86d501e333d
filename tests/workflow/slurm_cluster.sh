#!/usr/bin/env bash
# A throw-away one-node SLURM cluster (slurmctld + slurmd + munged) on this machine,
# for testing the workflow's SLURM profile. Needs root and Debian's apt.
#
#   tests/workflow/slurm_cluster.sh install   apt-get install slurm-wlm munge (if missing)
#   tests/workflow/slurm_cluster.sh up        write a one-node slurm.conf, start the daemons
#   tests/workflow/slurm_cluster.sh down      stop the daemons this script started
#   tests/workflow/slurm_cluster.sh status    sinfo + squeue
#
# State (config, spool, logs, pid files) lives in $NEUROFLOW_SLURM_STATE
# (default /tmp/neuroflow-slurm). `down` stops only the processes whose pids `up`
# recorded, after checking their command names. No accounting daemon (slurmdbd) is
# started: sacct does not work, so snakemake must query job states with squeue.
set -euo pipefail

STATE=${NEUROFLOW_SLURM_STATE:-/tmp/neuroflow-slurm}
CONF_DIR=/etc/slurm
HOST=$(hostname -s)
MARK=tests/workflow/slurm_cluster.sh

log() { echo "[slurm_cluster] $*" >&2; }

install() {
    if command -v slurmctld >/dev/null && command -v munged >/dev/null; then
        log "slurm-wlm and munge already installed"
        return
    fi
    command -v apt-get >/dev/null || { log "apt-get not found"; exit 3; }
    log "installing slurm-wlm and munge"
    timeout 600 apt-get update -qq
    DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y -qq --no-install-recommends \
        slurm-wlm munge >/dev/null
}

# Memory for jobs: ~90% of what is available now, in MB.
real_memory() {
    awk '/MemAvailable/ {printf "%d", $2 / 1024 * 0.9}' /proc/meminfo
}

write_conf() {
    # Never touch the configuration of a real cluster.
    if [ -f "$CONF_DIR/slurm.conf" ] && ! grep -q "written by $MARK" "$CONF_DIR/slurm.conf"; then
        log "$CONF_DIR/slurm.conf exists and was not written by this script: not replacing it"
        exit 5
    fi
    mkdir -p "$STATE"/{spool/ctld,spool/d,log,run} "$CONF_DIR"
    cat >"$CONF_DIR/slurm.conf" <<EOF
# One-node test cluster written by $MARK
ClusterName=neuroflow
SlurmctldHost=${HOST}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1024
SchedulerParameters=batch_sched_delay=0
ReturnToService=2
MinJobAge=300
StateSaveLocation=$STATE/spool/ctld
SlurmdSpoolDir=$STATE/spool/d
SlurmctldPidFile=$STATE/run/slurmctld.pid
SlurmdPidFile=$STATE/run/slurmd.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd.log
SlurmctldPort=6817
SlurmdPort=6818
NodeName=${HOST} NodeAddr=127.0.0.1 CPUs=$(nproc) RealMemory=$(real_memory) State=UNKNOWN
PartitionName=debug Nodes=${HOST} Default=YES MaxTime=INFINITE State=UP
EOF
}

start_munge() {
    if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
        log "munge already running"
        return
    fi
    mkdir -p /run/munge /var/log/munge /var/lib/munge
    chown munge:munge /run/munge /var/log/munge /var/lib/munge
    chmod 0755 /run/munge
    [ -s /etc/munge/munge.key ] || { log "/etc/munge/munge.key is missing"; exit 3; }
    runuser -u munge -- /usr/sbin/munged
    for _ in $(seq 50); do
        pid=$(cat /run/munge/munged.pid 2>/dev/null || true)
        [ -n "$pid" ] && { echo "$pid" >"$STATE/run/munged.started"; break; }
        sleep 0.1
    done
    munge -n | unmunge >/dev/null
}

up() {
    write_conf
    start_munge
    for daemon in slurmctld slurmd; do
        if [ -s "$STATE/run/$daemon.pid" ] && kill -0 "$(cat "$STATE/run/$daemon.pid")" 2>/dev/null; then
            log "$daemon already running"
            continue
        fi
        if [ "$daemon" = slurmctld ]; then /usr/sbin/slurmctld -c -i; else /usr/sbin/slurmd; fi
    done
    for _ in $(seq 100); do
        if sinfo -h -N -o '%T' 2>/dev/null | grep -qx idle; then break; fi
        sleep 0.2
    done
    sinfo -h -N -o '%T' | grep -qx idle || { log "node did not become idle"; sinfo; exit 4; }
    timeout 60 srun -t 1 hostname >/dev/null
    log "cluster up: node $HOST idle, $(nproc) CPUs, $(real_memory) MB"
}

# Stop one process by its recorded pid, if it is still the daemon we started.
stop_pid() {
    local pidfile=$1 name=$2 pid
    [ -s "$pidfile" ] || return 0
    pid=$(cat "$pidfile")
    if [ -r "/proc/$pid/comm" ] && [ "$(cat "/proc/$pid/comm")" = "$name" ]; then
        kill "$pid"
        for _ in $(seq 100); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
    fi
    rm -f "$pidfile"
}

down() {
    # Jobs left on this private test cluster (only this script's daemons run them).
    scancel --partition=debug >/dev/null 2>&1 || true
    stop_pid "$STATE/run/slurmd.pid" slurmd
    stop_pid "$STATE/run/slurmctld.pid" slurmctld
    if [ -s "$STATE/run/munged.started" ]; then
        stop_pid "$STATE/run/munged.started" munged
    fi
    # With a slurm.conf naming a stopped controller, every `scontrol` call (which the
    # snakemake SLURM plugin makes at start-up, even for local runs) waits ~9 s.
    if [ -f "$CONF_DIR/slurm.conf" ] && grep -q "written by $MARK" "$CONF_DIR/slurm.conf"; then
        rm -f "$CONF_DIR/slurm.conf"
    fi
    log "cluster down"
}

status() {
    sinfo
    squeue
}

case "${1:-}" in
    install) install ;;
    up) up ;;
    down) down ;;
    status) status ;;
    *) echo "usage: $0 install|up|down|status" >&2; exit 2 ;;
esac
