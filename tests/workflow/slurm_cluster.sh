#!/usr/bin/env bash
# A throw-away one-node SLURM cluster with job accounting on this machine, for testing
# the workflow's SLURM profile: munged, MariaDB (unix socket only), slurmdbd, slurmctld
# and slurmd. Needs root and Debian's apt.
#
#   tests/workflow/slurm_cluster.sh install   apt-get install slurm-wlm slurmdbd munge
#                                             mariadb-server (if missing)
#   tests/workflow/slurm_cluster.sh up        write slurm.conf + slurmdbd.conf, start the daemons
#   tests/workflow/slurm_cluster.sh down      stop the daemons this script started
#   tests/workflow/slurm_cluster.sh status    sinfo + squeue + sacct
#
# State (database, spool, logs, pid files) lives in $NEUROFLOW_SLURM_STATE
# (default /tmp/neuroflow-slurm). `down` stops only the processes whose pids `up`
# recorded, after checking their command names, and removes the two config files.
# MariaDB gets its own data directory and socket under the state folder and no TCP
# listener (--skip-networking); slurmdbd reaches it through that socket.
set -euo pipefail

STATE=${NEUROFLOW_SLURM_STATE:-/tmp/neuroflow-slurm}
CONF_DIR=/etc/slurm
HOST=$(hostname -s)
MARK=tests/workflow/slurm_cluster.sh
CLUSTER_NAME=neuroflow
DB_DATA=$STATE/mysql
DB_RUN=$STATE/mysqld
DB_SOCKET=$DB_RUN/mysqld.sock
DB_NAME=slurm_acct_db
DB_USER=slurm

log() { echo "[slurm_cluster] $*" >&2; }

install() {
    local missing=0 cmd
    for cmd in slurmctld slurmd slurmdbd sacct sacctmgr munged mariadbd mariadb-install-db \
        mariadb mariadb-admin; do
        command -v "$cmd" >/dev/null || missing=1
    done
    if [ "$missing" = 0 ]; then
        log "slurm-wlm, slurmdbd, munge and mariadb-server already installed"
        return
    fi
    command -v apt-get >/dev/null || { log "apt-get not found"; exit 3; }
    log "installing slurm-wlm, slurmdbd, munge and mariadb-server"
    timeout 600 apt-get update -qq
    DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y -qq --no-install-recommends \
        slurm-wlm slurmdbd munge mariadb-server >/dev/null
}

# Memory for jobs: ~90% of what is available now, in MB.
real_memory() {
    awk '/MemAvailable/ {printf "%d", $2 / 1024 * 0.9}' /proc/meminfo
}

# True when $1 exists and was written by this script.
ours() {
    [ -f "$1" ] && grep -q "written by $MARK" "$1"
}

write_conf() {
    # Never touch the configuration of a real cluster.
    local conf
    for conf in "$CONF_DIR/slurm.conf" "$CONF_DIR/slurmdbd.conf"; do
        if [ -f "$conf" ] && ! ours "$conf"; then
            log "$conf exists and was not written by this script: not replacing it"
            exit 5
        fi
    done
    mkdir -p "$STATE"/{spool/ctld,spool/d,log,run} "$CONF_DIR"
    cat >"$CONF_DIR/slurm.conf" <<EOF
# One-node test cluster written by $MARK
ClusterName=$CLUSTER_NAME
SlurmctldHost=${HOST}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=30
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=6819
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

# slurmdbd.conf holds the database password: created with mode 600, owned by SlurmUser.
write_dbd_conf() {
    local password=$1
    (
        umask 077
        cat >"$CONF_DIR/slurmdbd.conf" <<EOF
# Accounting daemon of the one-node test cluster, written by $MARK
AuthType=auth/munge
DbdHost=${HOST}
DbdAddr=127.0.0.1
DbdPort=6819
SlurmUser=root
PidFile=$STATE/run/slurmdbd.pid
LogFile=$STATE/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageLoc=$DB_NAME
StorageUser=$DB_USER
StoragePass=$password
EOF
    )
    chown root:root "$CONF_DIR/slurmdbd.conf"
    chmod 600 "$CONF_DIR/slurmdbd.conf"
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

# True while the pid recorded in $1 is alive.
running() {
    [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null
}

# Run SQL from stdin as MariaDB's root (unix-socket authentication as the OS root).
sql() {
    timeout 30 mariadb --no-defaults --socket="$DB_SOCKET" -u root --batch
}

# MariaDB in its own data directory, reachable only through $DB_SOCKET.
start_mariadb() {
    if running "$STATE/run/mariadbd.started"; then
        log "mariadbd already running"
        return
    fi
    mkdir -p "$DB_DATA" "$DB_RUN"
    chown mysql:mysql "$DB_DATA" "$DB_RUN"
    if [ ! -d "$DB_DATA/mysql" ]; then
        log "creating the MariaDB data directory $DB_DATA"
        timeout 120 mariadb-install-db --no-defaults --user=mysql --datadir="$DB_DATA" \
            --auth-root-authentication-method=socket --skip-test-db \
            >"$STATE/log/mariadb-install-db.log" 2>&1
    fi
    # --no-defaults: none of /etc/mysql applies. slurmdbd still logs that the default
    # innodb_buffer_pool_size (128 MB) is below its recommendation: harmless for a test.
    setsid /usr/sbin/mariadbd --no-defaults --user=mysql --datadir="$DB_DATA" \
        --socket="$DB_SOCKET" --pid-file="$DB_RUN/mariadbd.pid" --skip-networking \
        --log-error="$STATE/log/mariadb.log" --innodb-lock-wait-timeout=900 \
        </dev/null >>"$STATE/log/mariadb.log" 2>&1 &
    echo $! >"$STATE/run/mariadbd.started"
    for _ in $(seq 150); do
        if timeout 5 mariadb-admin --no-defaults --socket="$DB_SOCKET" -u root ping \
            >/dev/null 2>&1; then
            # The server's own record of its pid (setsid may have forked).
            cp "$DB_RUN/mariadbd.pid" "$STATE/run/mariadbd.started"
            return
        fi
        running "$STATE/run/mariadbd.started" || break
        sleep 0.2
    done
    log "mariadbd did not start; see $STATE/log/mariadb.log"
    tail -n 20 "$STATE/log/mariadb.log" >&2 || true
    exit 4
}

# The accounting database and its user; the password changes with every `up`.
create_db() {
    local password=$1
    sql <<EOF
CREATE DATABASE IF NOT EXISTS $DB_NAME;
CREATE USER IF NOT EXISTS '$DB_USER'@'localhost' IDENTIFIED BY '$password';
ALTER USER '$DB_USER'@'localhost' IDENTIFIED BY '$password';
GRANT ALL ON $DB_NAME.* TO '$DB_USER'@'localhost';
EOF
}

start_slurmdbd() {
    if running "$STATE/run/slurmdbd.pid"; then
        log "slurmdbd already running"
    else
        # libmariadb reads the socket path from MYSQL_UNIX_PORT.
        MYSQL_UNIX_PORT="$DB_SOCKET" /usr/sbin/slurmdbd
    fi
    for _ in $(seq 100); do
        timeout 10 sacctmgr -n -P list cluster format=Cluster >/dev/null 2>&1 && break
        sleep 0.2
    done
    local clusters
    clusters=$(timeout 10 sacctmgr -n -P list cluster format=Cluster) || {
        log "slurmdbd does not answer; see $STATE/log/slurmdbd.log"
        tail -n 20 "$STATE/log/slurmdbd.log" >&2 || true
        exit 4
    }
    if ! grep -qx "$CLUSTER_NAME" <<<"$clusters"; then
        timeout 30 sacctmgr -i add cluster "$CLUSTER_NAME" >/dev/null
    fi
}

up() {
    local password
    password=$(head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')
    write_conf
    write_dbd_conf "$password"
    start_munge
    start_mariadb
    create_db "$password"
    start_slurmdbd
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
    log "cluster up: node $HOST idle, $(nproc) CPUs, $(real_memory) MB, accounting in slurmdbd"
}

# Stop processes by their recorded pids (arguments: PIDFILE:NAME ...), each only if it is
# still the daemon we started (/proc/PID/comm == NAME); wait up to 10 s, then kill -9.
stop_pids() {
    local entry pidfile name pid pids=() _
    for entry in "$@"; do
        pidfile=${entry%%:*} name=${entry#*:}
        [ -s "$pidfile" ] || continue
        pid=$(cat "$pidfile")
        if [ -r "/proc/$pid/comm" ] && [ "$(cat "/proc/$pid/comm")" = "$name" ]; then
            kill "$pid" && pids+=("$pid")
        fi
        rm -f "$pidfile"
    done
    [ "${#pids[@]}" -gt 0 ] || return 0
    for _ in $(seq 100); do
        # Succeeds while any of them is alive.
        kill -0 "${pids[@]}" 2>/dev/null || break
        sleep 0.1
    done
    for pid in "${pids[@]}"; do
        if kill -0 "$pid" 2>/dev/null; then kill -9 "$pid"; fi
    done
}

down() {
    # Jobs left on this private test cluster (only this script's daemons run them).
    scancel --partition=debug >/dev/null 2>&1 || true
    # Clients before servers: slurmd + slurmctld, then slurmdbd, then MariaDB + munged
    # (munged only if `up` started it).
    stop_pids "$STATE/run/slurmd.pid:slurmd" "$STATE/run/slurmctld.pid:slurmctld"
    stop_pids "$STATE/run/slurmdbd.pid:slurmdbd"
    stop_pids "$STATE/run/mariadbd.started:mariadbd" "$STATE/run/munged.started:munged"
    # With a slurm.conf naming a stopped controller, every `scontrol` call (which the
    # snakemake SLURM plugin makes at start-up, even for local runs) waits ~9 s; with
    # accounting configured, `sacct`/`sacctmgr` calls would also wait for slurmdbd.
    # slurmdbd.conf holds the database password.
    local conf
    for conf in "$CONF_DIR/slurm.conf" "$CONF_DIR/slurmdbd.conf"; do
        if ours "$conf"; then rm -f "$conf"; fi
    done
    log "cluster down"
}

status() {
    sinfo
    squeue
    sacct -X -o JobID,JobName,State,Elapsed
}

case "${1:-}" in
    install) install ;;
    up) up ;;
    down) down ;;
    status) status ;;
    *) echo "usage: $0 install|up|down|status" >&2; exit 2 ;;
esac
