#!/usr/bin/env bash
# Bring up a local Slurm test cluster on this machine: munged, MariaDB +
# slurmdbd (for sacct), slurmctld, NODES slurmd daemons (node1..nodeN, one
# port each) and a private sshd on 127.0.0.1:2222 with fresh keys.
#
# Idempotent: if the cluster this script started is up and healthy, it only
# checks it and exits. If it is partly broken, it is stopped and started
# afresh. Writes $SRT_CLUSTER_BASE/cluster.env for the test suite.
set -Eeuo pipefail  # -E: the ERR trap below also reports failures inside functions

PROG=up.sh
# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

on_error() {
    printf '%s: error: command failed at line %s (exit %s): %s\n' "$PROG" "$1" "$2" "$3" >&2
    printf '%s: daemons may be partly running; tests/cluster/down.sh stops them\n' "$PROG" >&2
}
trap 'on_error "$LINENO" "$?" "$BASH_COMMAND"' ERR

require_root "it starts Slurm, MariaDB and sshd daemons"
check_settings
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
for b in slurmctld slurmd slurmdbd munged mariadbd mariadb-install-db sshd ssh ssh-keygen sinfo sacctmgr ss flock; do
    command -v "$b" >/dev/null 2>&1 || die "$b not found; run tests/cluster/install.sh first"
done

# sshd (StrictModes) refuses authorized_keys below a group/world-writable
# directory such as /tmp.
parent=$BASE
while [[ $parent != / ]]; do
    parent=$(dirname "$parent")
    if [[ -d $parent && -n $(find "$parent" -maxdepth 0 -perm /022) ]]; then
        die "$parent is group/world-writable; sshd would refuse keys under SRT_CLUSTER_BASE=$BASE (use e.g. /var/lib/...)"
    fi
done

take_lock

SSH_OPTS=(-F /dev/null -p "$SSH_PORT" -i "$SSH_KEY" -o IdentitiesOnly=yes -o BatchMode=yes
          -o StrictHostKeyChecking=yes -o "UserKnownHostsFile=$KNOWN_HOSTS"
          -o GlobalKnownHostsFile=/dev/null -o ConnectTimeout=5 -o LogLevel=ERROR)

# Fingerprint of everything that shapes the cluster; a running cluster with a
# different fingerprint is restarted.
config_sha() {
    {
        cat "$SCRIPT_DIR/common.sh" "$SCRIPT_DIR/up.sh" "$SCRIPT_DIR/in-ns.sh"
        printf '%s\n' "$BASE" "$NODES" "$CPUS"
    } | sha256sum | cut -d' ' -f1
}

step() { log "$(elapsed)s  $*"; }

# Start a daemon without the lock file descriptor (a daemon holding it would
# keep the lock forever).
spawn() { "$@" 9>&-; }

tail_log() {
    local f
    for f in "$@"; do
        [[ -e $f ]] || continue
        printf -- '----- tail %s -----\n' "$f" >&2
        tail -n 30 "$f" >&2 || true
    done
}

# wait_for DESC SECONDS "LOG FILES" "DAEMONS" CMD...: poll CMD every 50 ms
# until it succeeds. Fails at once if one of DAEMONS has written its PID file
# and is gone again (daemons exit 0 right after forking even when they die),
# and after SECONDS; either way the log tails are printed.
wait_for() {
    local desc=$1 secs=$2 logs=$3 daemons=$4
    shift 4
    local deadline d why
    deadline=$(awk -v s="$(date +%s.%N)" -v d="$secs" 'BEGIN { printf "%.3f", s + d }')
    until "$@" >/dev/null 2>&1; do
        why=""
        for d in $daemons; do
            if [[ -s $(pidfile_for "$d") ]] && ! pid_of "$d" >/dev/null; then
                why="$d exited"
            fi
        done
        if [[ -z $why ]] && awk -v n="$(date +%s.%N)" -v d="$deadline" 'BEGIN { exit !(n > d) }'; then
            why="timed out after ${secs}s"
        fi
        if [[ -n $why ]]; then
            printf '%s: error: %s while waiting for %s\n' "$PROG" "$why" "$desc" >&2
            # shellcheck disable=SC2086
            tail_log $logs
            exit 1
        fi
        sleep 0.05
    done
}

# --- health check -----------------------------------------------------------

UNHEALTHY=""
nodes_ready() {
    local states bad
    states=$(timeout 5 sinfo -h -N -p "$PARTITION" -o '%N %t' 2>/dev/null) || return 1
    [[ $(grep -c . <<<"$states") -eq $NODES ]] || return 1
    bad=$(awk '$2 !~ /^(idle|alloc|mix|comp)$/' <<<"$states")
    [[ -z $bad ]]
}
nodes_idle() {
    local states
    states=$(timeout 5 sinfo -h -N -p "$PARTITION" -o '%t' 2>/dev/null) || return 1
    [[ $(grep -c '^idle$' <<<"$states") -eq $NODES ]]
}
sacct_ready() { timeout 10 sacctmgr -n -P show cluster format=Cluster 2>/dev/null | grep -qx "$CLUSTER_NAME"; }
ssh_ok() { timeout 15 ssh "${SSH_OPTS[@]}" "$1@$SSH_HOST" true </dev/null; }

cluster_healthy() {
    local n
    for n in munged mariadbd slurmdbd slurmctld sshd $(node_names | sed 's/^/slurmd-/'); do
        if [[ $n == munged && ! -e $(pidfile_for munged) ]]; then
            # a munged we did not start is reused; it must still answer
            munge -n 2>/dev/null | unmunge >/dev/null 2>&1 || { UNHEALTHY="munged does not answer"; return 1; }
            continue
        fi
        pid_of "$n" >/dev/null || { UNHEALTHY="$n is not running"; return 1; }
    done
    [[ -r $ENV_FILE && -r $RUN/config.sha ]] || { UNHEALTHY="no env file"; return 1; }
    [[ $(cat "$RUN/config.sha") == "$(config_sha)" ]] || { UNHEALTHY="configuration changed"; return 1; }
    grep -qxF "$MARKER" "$SLURM_CONF" 2>/dev/null || { UNHEALTHY="$SLURM_CONF was replaced"; return 1; }
    slurm_up || { UNHEALTHY="scontrol ping does not report UP"; return 1; }
    nodes_ready || { UNHEALTHY="not all $NODES nodes are idle/alloc/mix"; return 1; }
    sacct_ready || { UNHEALTHY="sacctmgr does not answer"; return 1; }
    ssh_ok "$TEST_USER" || { UNHEALTHY="ssh $TEST_USER@$SSH_HOST:$SSH_PORT fails"; return 1; }
    return 0
}

summary() {
    log "cluster '$CLUSTER_NAME': $NODES nodes x $CPUS CPUs, partition $PARTITION, first job id $(grep -E '^FirstJobId=' "$SLURM_CONF" | cut -d= -f2)"
    log "ssh: ssh -F /dev/null -p $SSH_PORT -i $SSH_KEY -o UserKnownHostsFile=$KNOWN_HOSTS $TEST_USER@$SSH_HOST"
    log "env file: $ENV_FILE"
}

if [[ -n $(our_daemons) ]]; then
    if cluster_healthy; then
        summary
        log "already up and healthy (checked in $(elapsed) s)"
        exit 0
    fi
    log "running cluster is not healthy ($UNHEALTHY); restarting it"
    cluster_stop
    step "stopped the previous cluster"
fi

# --- the namespace's /etc/hosts ----------------------------------------------------

# Bound over /etc/hosts for everything in the namespace (in_ns): node names resolve to the
# only address the cluster has. Written first: every in_ns call (the port check below
# included) binds it, and a fresh machine has no /etc/netns yet.
install -d -m 0755 "/etc/netns/$NETNS"
{
    printf '%s\n' "$MARKER"
    printf '127.0.0.1 localhost %s %s\n' "$(hostname)" "$(node_names | tr '\n' ' ')"
    printf '::1 localhost ip6-localhost ip6-loopback\n'
} >"$NS_HOSTS"

# --- ports ------------------------------------------------------------------

# On the host, only the bridged ports; inside the namespace, every port (a namespace left
# over from an earlier run may still hold processes).
PORTS=("$SLURMCTLD_PORT" "$SLURMDBD_PORT" "$SSH_PORT" "$MYSQL_PORT")
for ((i = 0; i < NODES; i++)); do PORTS+=($((SLURMD_PORT0 + i))); done
port_users() {
    local p line
    for p in "${@:2}"; do
        line=$($1 ss -H -ltnp 2>/dev/null | awk -v p=":$p" 'substr($4, length($4) - length(p) + 1) == p' | head -n1)
        [[ -z $line ]] || printf '  port %s: %s\n' "$p" "$line"
    done
}
busy=$(port_users "" "${BRIDGED_PORTS[@]}")
if ip netns list 2>/dev/null | grep -qw "$NETNS"; then
    busy+=$(port_users in_ns "${PORTS[@]}")
fi
if [[ -n $busy ]]; then
    printf '%s: error: ports needed by the test cluster are in use by processes it did not start:\n%s\n' "$PROG" "$busy" >&2
    printf '%s: stop them (or the other Slurm/MariaDB/sshd) and run up.sh again\n' "$PROG" >&2
    exit 1
fi

# --- the cluster's network namespace -----------------------------------------------

ip netns list 2>/dev/null | grep -qw "$NETNS" || ip netns add "$NETNS"
in_ns ip link set lo up
# glibc's getaddrinfo(AI_ADDRCONFIG), which Slurm's daemons use to listen, returns no IPv4
# address on a host whose only one is 127.0.0.1. A second loopback address counts; it is still
# on lo, so nothing resolves a node to anything but the loopback.
in_ns ip -4 addr show dev lo | grep -q '127.0.0.2/' || in_ns ip addr add 127.0.0.2/32 dev lo

# --- fresh directories ------------------------------------------------------

rm -rf "$RUN" "$LOGDIR" "$SSHDIR" "$MYSQL_DATA" "$MYSQL_RUN" "${BASE:?}/state" "${BASE:?}/spool"
rm -f "$ENV_FILE"
install -d -m 0755 "$BASE" "$RUN" "$LOGDIR" "$SSHDIR" "$SSHDIR/authorized_keys" "$BASE/state" "$BASE/spool" \
    "$BASE/home"
install -d -m 0700 "$BASE/state/slurmctld"
install -d -o mysql -g mysql -m 0750 "$MYSQL_DATA" "$LOGDIR/mariadb"
install -d -o mysql -g mysql -m 0755 "$MYSQL_RUN"

# --- bridges from the host's loopback into the namespace ---------------------------

# Detached (own session, no inherited descriptors); the PID file names the process itself.
spawn_bg() {
    local pidfile=$1
    shift
    setsid -f sh -c 'echo $$ >"$0"; exec "$@"' "$pidfile" "$@" </dev/null >>"$LOGDIR/bridges.log" 2>&1 9>&-
}
for p in "${BRIDGED_PORTS[@]}"; do
    sock=$RUN/bridge-$p.sock
    spawn_bg "$(pidfile_for "bridge-in-$p")" \
        env SRT_CLUSTER_NETNS="$NETNS" "$SCRIPT_DIR/in-ns.sh" socat "UNIX-LISTEN:$sock,fork,unlink-early,mode=0600" "TCP:127.0.0.1:$p"
    spawn_bg "$(pidfile_for "bridge-out-$p")" \
        socat "TCP-LISTEN:$p,bind=127.0.0.1,reuseaddr,fork" "UNIX-CONNECT:$sock"
done
bridges_up() {
    local n
    for n in $(bridge_names); do pid_of "$n" >/dev/null || return 1; done
    for p in "${BRIDGED_PORTS[@]}"; do [[ -S $RUN/bridge-$p.sock ]] || return 1; done
}
# shellcheck disable=SC2046
wait_for "bridges" 10 "$LOGDIR/bridges.log" "$(bridge_names | tr '\n' ' ')" bridges_up
step "bridges for ports ${BRIDGED_PORTS[*]}"

# --- munge ------------------------------------------------------------------

install -d -o munge -g munge -m 0755 /run/munge
if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
    log "reusing the munged that already answers on the default socket (not ours; down.sh leaves it)"
else
    if [[ ! -s /etc/munge/munge.key ]]; then
        install -d -o munge -g munge -m 0700 /etc/munge
        mungekey --create --keyfile=/etc/munge/munge.key 2>/dev/null \
            || dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
    fi
    chown munge:munge /etc/munge/munge.key
    chmod 0600 /etc/munge/munge.key
    install -d -o munge -g munge -m 0700 /var/log/munge /var/lib/munge
    spawn runuser -u munge -- /usr/sbin/munged --force
    wait_for "munged" 10 /var/log/munge/munged.log "" sh -c 'munge -n | unmunge'
    cp /run/munge/munged.pid "$RUN/munged.pid"
    pid_of munged >/dev/null || die "munged started but $RUN/munged.pid does not name it"
fi
step "munged ready"

# --- test user --------------------------------------------------------------

if ! id -u "$TEST_USER" >/dev/null 2>&1; then
    useradd -M -U -d "$HOME_DIR" -s /bin/bash -c "srt-console test user" "$TEST_USER"
elif [[ $(getent passwd "$TEST_USER" | cut -d: -f6) != "$HOME_DIR" ]]; then
    usermod -d "$HOME_DIR" "$TEST_USER"
fi
# useradd leaves the password field '!' (locked); with UsePAM no sshd then
# refuses even key logins. '*' means "no password, not locked".
if [[ $(getent shadow "$TEST_USER" | cut -d: -f2) != '*' ]]; then
    usermod -p '*' "$TEST_USER"
fi
install -d -o "$TEST_USER" -g "$TEST_USER" -m 0755 "$HOME_DIR"

# --- MariaDB (throw-away datadir) --------------------------------------------

# mariadb-install-db takes about a second; it runs while the ssh material is
# made and sshd starts.
(
    exec 9>&-
    mariadb-install-db --no-defaults --user=mysql --datadir="$MYSQL_DATA" --auth-root-authentication-method=socket \
        --skip-test-db --skip-name-resolve >"$LOGDIR/mariadb-install.log" 2>&1
    setsid -f env SRT_CLUSTER_NETNS="$NETNS" "$SCRIPT_DIR/in-ns.sh" /usr/sbin/mariadbd --no-defaults --user=mysql --datadir="$MYSQL_DATA" \
        --socket="$MYSQL_SOCK" --pid-file="$(pidfile_for mariadbd)" \
        --port="$MYSQL_PORT" --bind-address=127.0.0.1 --skip-name-resolve \
        --log-error="$LOGDIR/mariadb/mariadbd.log" \
        --innodb-buffer-pool-size=128M --innodb-log-file-size=32M --innodb-lock-wait-timeout=900 \
        --innodb-flush-log-at-trx-commit=2 --innodb-doublewrite=0 \
        </dev/null >/dev/null 2>&1
) &
db_init_pid=$!

# --- ssh material (while MariaDB starts) --------------------------------------

ssh-keygen -q -t ed25519 -N '' -C srt-console-cluster-host -f "$SSHDIR/ssh_host_ed25519_key"
ssh-keygen -q -t ed25519 -N '' -C srt-console-cluster-client -f "$SSH_KEY"
host_pub=$(cut -d' ' -f1,2 "$SSHDIR/ssh_host_ed25519_key.pub")
printf '[%s]:%s %s\n[localhost]:%s %s\n' "$SSH_HOST" "$SSH_PORT" "$host_pub" "$SSH_PORT" "$host_pub" \
    >"$KNOWN_HOSTS"
chmod 0644 "$KNOWN_HOSTS"
for u in root "$TEST_USER"; do
    install -m 0644 "$SSH_KEY.pub" "$SSHDIR/authorized_keys/$u"
done
cat >"$SSHDIR/sshd_config" <<EOF
$MARKER
ListenAddress $SSH_HOST
Port $SSH_PORT
HostKey $SSHDIR/ssh_host_ed25519_key
PidFile $RUN/sshd.pid
AuthorizedKeysFile $SSHDIR/authorized_keys/%u
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
PermitRootLogin prohibit-password
AllowUsers root $TEST_USER
StrictModes yes
MaxStartups 100:30:200
MaxSessions 50
MaxAuthTries 10
LoginGraceTime 30
ClientAliveInterval 0
X11Forwarding no
PrintMotd no
PrintLastLog no
AcceptEnv LANG LC_*
Subsystem sftp internal-sftp
LogLevel VERBOSE
EOF
install -d -m 0755 /run/sshd
/usr/sbin/sshd -t -f "$SSHDIR/sshd_config" || die "sshd -t rejected $SSHDIR/sshd_config"
spawn in_ns /usr/sbin/sshd -f "$SSHDIR/sshd_config" -E "$LOGDIR/sshd.log"
step "sshd started"

# --- slurmdbd ---------------------------------------------------------------

if ! wait "$db_init_pid"; then
    tail_log "$LOGDIR/mariadb-install.log"
    die "mariadb-install-db or starting mariadbd failed"
fi
mysql_ready() { mariadb-admin --no-defaults --socket="$MYSQL_SOCK" -u root ping; }
wait_for "mariadbd" 30 "$LOGDIR/mariadb/mariadbd.log" mariadbd mysql_ready
pid_of mariadbd >/dev/null || die "mariadbd answers but $(pidfile_for mariadbd) does not name it"
db_pass=$(head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')
mariadb --no-defaults --socket="$MYSQL_SOCK" -u root <<EOF
CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY '$db_pass';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
EOF
step "mariadbd ready"

if [[ -e $SLURM_CONF ]] && ! grep -qxF "$MARKER" "$SLURM_CONF"; then
    backup=$SLURM_CONF.pre-srt-console-cluster
    [[ -e $backup ]] || cp -p "$SLURM_CONF" "$backup"
    log "an existing $SLURM_CONF (not ours) was saved as $backup"
fi
install -d -m 0755 /etc/slurm
umask_old=$(umask)
umask 077
cat >"$SLURMDBD_CONF.tmp" <<EOF
$MARKER
AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$SLURMDBD_PORT
SlurmUser=root
LogFile=$LOGDIR/slurmdbd.log
PidFile=$RUN/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$MYSQL_PORT
StorageUser=slurm
StoragePass=$db_pass
StorageLoc=slurm_acct_db
EOF
mv -f "$SLURMDBD_CONF.tmp" "$SLURMDBD_CONF"
umask "$umask_old"

# --- slurm.conf ---------------------------------------------------------------

# Job ids keep growing across bring-ups (ten ids per second of wall time,
# wrapping after ~69 days), so ids from an earlier run are not reused soon.
first_job_id=$((($(date +%s) % 6000000) * 10 + 1000))
{
    cat <<EOF
$MARKER
# Regenerated by every bring-up; edit tests/cluster/up.sh instead.
ClusterName=$CLUSTER_NAME
SlurmctldHost=$(hostname -s)(127.0.0.1)
SlurmctldPort=$SLURMCTLD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
CommunicationParameters=NoInAddrAny
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
# Nodes claim more CPUs than the machine has.
SlurmdParameters=config_overrides
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0
KillWait=2
MinJobAge=86400
FirstJobId=$first_job_id
ReturnToService=2
InactiveLimit=0
StateSaveLocation=$BASE/state/slurmctld
SlurmdSpoolDir=$BASE/spool/slurmd-%n
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd-%n.pid
SlurmctldLogFile=$LOGDIR/slurmctld.log
SlurmdLogFile=$LOGDIR/slurmd-%n.log
MailProg=/bin/true
JobCompType=jobcomp/filetxt
JobCompLoc=$LOGDIR/jobcomp.log
AccountingStorageType=accounting_storage/slurmdbd
# sacct keeps job comments (the console marks its jobs there, to find them after a kill).
AccountingStoreFlags=job_comment
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$SLURMDBD_PORT
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=30
EOF
    for ((i = 1; i <= NODES; i++)); do
        printf 'NodeName=node%d NodeAddr=127.0.0.1 Port=%d CPUs=%d RealMemory=4096 State=UNKNOWN\n' \
            "$i" $((SLURMD_PORT0 + i - 1)) "$CPUS"
    done
    printf 'PartitionName=%s Nodes=node[1-%d] Default=YES MaxTime=INFINITE State=UP\n' "$PARTITION" "$NODES"
} >"$SLURM_CONF.tmp"
chmod 0644 "$SLURM_CONF.tmp"
mv -f "$SLURM_CONF.tmp" "$SLURM_CONF"

spawn in_ns /usr/sbin/slurmdbd >"$LOGDIR/slurmdbd.stderr" 2>&1
wait_for "slurmdbd (sacctmgr show cluster)" 30 "$LOGDIR/slurmdbd.log $LOGDIR/slurmdbd.stderr" slurmdbd \
    timeout 10 sacctmgr -n show cluster
sacctmgr -i add cluster "$CLUSTER_NAME" >/dev/null
step "slurmdbd ready, cluster '$CLUSTER_NAME' registered"

# --- slurmctld + slurmd -----------------------------------------------------------

# The container stand-in (stack.sh) is a required plugin: a stack.sh registration whose plugin
# file is gone (its base dir was wiped) would stop every slurmd; it is registered again by
# stack.sh.
if [[ -e $PLUGSTACK_CONF ]] && grep -qxF "$MARKER" "$PLUGSTACK_CONF" \
    && ! [[ -r $(awk '$1 == "required" { print $2 }' "$PLUGSTACK_CONF") ]]; then
    rm -f "$PLUGSTACK_CONF"
    log "removed $PLUGSTACK_CONF: its plugin is gone (stack.sh installs it again)"
fi

spawn in_ns /usr/sbin/slurmctld -c >"$LOGDIR/slurmctld.stderr" 2>&1
wait_for "slurmctld (scontrol ping)" 30 "$LOGDIR/slurmctld.log $LOGDIR/slurmctld.stderr" slurmctld slurm_up
step "slurmctld UP"
for n in $(node_names); do
    install -d -m 0755 "$BASE/spool/slurmd-$n"
    spawn in_ns /usr/sbin/slurmd -N "$n" >"$LOGDIR/slurmd-$n.stderr" 2>&1 \
        || { tail_log "$LOGDIR/slurmd-$n.log" "$LOGDIR/slurmd-$n.stderr"; die "slurmd for $n did not start"; }
done
node_logs=$(for n in $(node_names); do printf '%s ' "$LOGDIR/slurmd-$n.log" "$LOGDIR/slurmd-$n.stderr"; done)
wait_for "$NODES nodes idle (sinfo)" 30 "$LOGDIR/slurmctld.log $node_logs" \
    "slurmctld $(node_names | sed 's/^/slurmd-/' | tr '\n' ' ')" nodes_idle
for n in $(node_names); do
    pid_of "slurmd-$n" >/dev/null || die "slurmd for $n is not running (see $LOGDIR/slurmd-$n.log)"
done
pid_of slurmctld >/dev/null || die "slurmctld is not running (see $LOGDIR/slurmctld.log)"
step "$NODES nodes idle"

# --- final checks -------------------------------------------------------------------

pid_of sshd >/dev/null || { tail_log "$LOGDIR/sshd.log"; die "sshd is not running"; }
# Both logins at once (each is a fresh ssh handshake).
for u in "$TEST_USER" root; do
    timeout 15 ssh "${SSH_OPTS[@]}" "$u@$SSH_HOST" 'id -un; sinfo -h -o %D' </dev/null \
        >"$RUN/ssh-check-$u.out" 2>&1 9>&- &
done
sacct_ready || die "sacctmgr does not list cluster $CLUSTER_NAME"
ssh_failed=0
wait || ssh_failed=1
for u in "$TEST_USER" root; do
    out=$(cat "$RUN/ssh-check-$u.out")
    rm -f "$RUN/ssh-check-$u.out"
    if [[ $ssh_failed -ne 0 || $out != "$u"$'\n'"$NODES" ]]; then
        tail_log "$LOGDIR/sshd.log"
        die "ssh $u@$SSH_HOST:$SSH_PORT did not answer as expected: $out"
    fi
done
step "ssh as $TEST_USER and root works"

{
    printf '# Written by tests/cluster/up.sh; shell-sourceable.\n'
    printf '%s=%q\n' \
        SRT_CLUSTER_BASE "$BASE" \
        SRT_CLUSTER_NAME "$CLUSTER_NAME" \
        SRT_CLUSTER_SSH_HOST "$SSH_HOST" \
        SRT_CLUSTER_SSH_PORT "$SSH_PORT" \
        SRT_CLUSTER_SSH_USER "$TEST_USER" \
        SRT_CLUSTER_SSH_IDENTITY "$SSH_KEY" \
        SRT_CLUSTER_SSH_KNOWN_HOSTS "$KNOWN_HOSTS" \
        SRT_CLUSTER_NODES "$NODES" \
        SRT_CLUSTER_CPUS_PER_NODE "$CPUS" \
        SRT_CLUSTER_PARTITION "$PARTITION" \
        SRT_CLUSTER_WORKDIR "$HOME_DIR" \
        SRT_CLUSTER_SLURM_CONF "$SLURM_CONF" \
        SRT_CLUSTER_FIRST_JOB_ID "$first_job_id" \
        SRT_CLUSTER_LOG_DIR "$LOGDIR"
} >"$ENV_FILE.tmp"
chmod 0644 "$ENV_FILE.tmp"
mv -f "$ENV_FILE.tmp" "$ENV_FILE"
config_sha >"$RUN/config.sha"

summary
log "up in $(elapsed) s"
