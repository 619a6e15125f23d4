# shellcheck shell=bash disable=SC2034
# Shared settings and helpers for up.sh and down.sh. Sourced, not executed.
# (SC2034: the settings are used by the scripts that source this file.)

BASE=${SRT_CLUSTER_BASE:-/var/lib/srt-console-cluster}
NODES=${SRT_CLUSTER_NODES:-5}
CPUS=${SRT_CLUSTER_CPUS:-8}
PARTITION=debug
CLUSTER_NAME=local
TEST_USER=hpcuser

SLURMCTLD_PORT=6817
SLURMDBD_PORT=6819
SLURMD_PORT0=6821          # node1 listens here, nodeN on SLURMD_PORT0 + N - 1
SSH_HOST=127.0.0.1
SSH_PORT=2222
MYSQL_PORT=3306
# The cluster is a machine of its own: every daemon and every job runs in this network
# namespace, whose only interface is its loopback. Nothing a job starts (NATS, etcd, workers,
# frontends) can bind or advertise any other address, and its ports cannot collide with the
# host's. The ports clients on the host need are bridged from the host's 127.0.0.1 (socat over
# a unix socket): sshd, slurmctld (sbatch, squeue, scancel, scontrol) and slurmdbd (sacct).
NETNS=srt-cluster
BRIDGED_PORTS=("$SLURMCTLD_PORT" "$SLURMDBD_PORT" "$SSH_PORT")

RUN=$BASE/run              # root-owned PID files
LOGDIR=$BASE/log
SSHDIR=$BASE/ssh
MYSQL_DATA=$BASE/mysql
MYSQL_RUN=$BASE/mysql-run  # owned by the mysql user (socket, PID file, error log)
HOME_DIR=$BASE/home/$TEST_USER
ENV_FILE=$BASE/cluster.env
SLURM_CONF=/etc/slurm/slurm.conf
SLURMDBD_CONF=/etc/slurm/slurmdbd.conf
MARKER="# managed-by: srt-console tests/cluster/up.sh"

# The serving stack (stack.sh): the real srtctl checkout of the test user, the container
# stand-in plugin, and the "images" (directories) the stand-in runs tasks from.
SRT_SLURM=$HOME_DIR/srt-slurm
STACK_LIB=$BASE/lib
IMAGES=$BASE/images
DYNAMO_IMAGE=$IMAGES/dynamo
PLUGSTACK_CONF=/etc/slurm/plugstack.conf.d/srt-console-container.conf

SSH_KEY=$SSHDIR/client_ed25519
KNOWN_HOSTS=$SSHDIR/known_hosts
MYSQL_SOCK=$MYSQL_RUN/mysqld.sock

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

_t0=$(date +%s.%N)

log() { printf '%s: %s\n' "$PROG" "$*"; }
warn() { printf '%s: warning: %s\n' "$PROG" "$*" >&2; }
die() { printf '%s: error: %s\n' "$PROG" "$*" >&2; exit 1; }
elapsed() { awk -v s="$_t0" -v e="$(date +%s.%N)" 'BEGIN { printf "%.2f", e - s }'; }

check_settings() {
    [[ $BASE == /* && $BASE != / && $BASE != *[[:space:]]* ]] \
        || die "SRT_CLUSTER_BASE must be an absolute path without spaces (got '$BASE')"
    if ! [[ $NODES =~ ^[1-9]$ ]]; then
        die "SRT_CLUSTER_NODES must be 1..9 (ports $SLURMD_PORT0..6829), got '$NODES'"
    fi
    if ! [[ $CPUS =~ ^[1-9][0-9]{0,2}$ ]] || ((CPUS > 256)); then
        die "SRT_CLUSTER_CPUS must be 1..256, got '$CPUS'"
    fi
}

require_root() {
    [[ $(id -u) -eq 0 ]] || die "must run as root ($1); current uid is $(id -u)"
}

# Serialize up.sh / down.sh (for example several pytest-xdist workers).
take_lock() {
    mkdir -p "$BASE"
    exec 9>"$BASE/.lock"
    flock -w 300 9 || die "timed out waiting for $BASE/.lock"
}

node_names() {
    local i
    for ((i = 1; i <= NODES; i++)); do printf 'node%d\n' "$i"; done
}

# --- PID files: which daemons are ours ------------------------------------

# Run a command inside the cluster's network namespace (in-ns.sh says how).
NS_HOSTS=/etc/netns/$NETNS/hosts
in_ns() { SRT_CLUSTER_NETNS=$NETNS "$SCRIPT_DIR/in-ns.sh" "$@"; }

bridge_names() {
    local p
    for p in "${BRIDGED_PORTS[@]}"; do printf 'bridge-in-%s\nbridge-out-%s\n' "$p" "$p"; done
}

# Daemon names: munged mariadbd slurmdbd slurmctld slurmd-nodeN sshd bridge-{in,out}-PORT
pidfile_for() {
    case $1 in
        mariadbd) printf '%s\n' "$MYSQL_RUN/mariadbd.pid" ;;
        *) printf '%s\n' "$RUN/$1.pid" ;;
    esac
}

comm_for() {
    case $1 in
        slurmd-*) printf 'slurmd\n' ;;
        bridge-*) printf 'socat\n' ;;
        *) printf '%s\n' "$1" ;;
    esac
}

# True if PID is a live (non-zombie) process whose name starts with $2.
pid_alive() {
    local pid=$1 comm=$2 stat name state
    [[ $pid =~ ^[0-9]+$ ]] || return 1
    stat=$(cat "/proc/$pid/stat" 2>/dev/null) || return 1
    name=${stat#*(}
    name=${name%%)*}
    state=${stat##*) }
    state=${state%% *}
    [[ $state != Z && $state != X ]] || return 1
    [[ $name == "$comm"* ]]
}

# Print the PID of our daemon $1 if it is running; fail otherwise.
pid_of() {
    local f pid
    f=$(pidfile_for "$1")
    [[ -r $f ]] || return 1
    read -r pid <"$f" 2>/dev/null || return 1
    pid_alive "$pid" "$(comm_for "$1")" || return 1
    printf '%s\n' "$pid"
}

# All daemon names that have a PID file under the base dir.
our_daemons() {
    local n
    for n in munged mariadbd slurmdbd slurmctld sshd $(node_names | sed 's/^/slurmd-/') $(bridge_names); do
        [[ -e $(pidfile_for "$n") ]] && printf '%s\n' "$n"
    done
    # slurmd PID files of nodes beyond the current NODES setting
    local f
    for f in "$RUN"/slurmd-node*.pid; do
        [[ -e $f ]] || continue
        n=$(basename "$f" .pid)
        case " $(node_names | sed 's/^/slurmd-/' | tr '\n' ' ') " in
            *" $n "*) ;;
            *) printf '%s\n' "$n" ;;
        esac
    done
}

# Wait until none of the given PIDs is alive; SIGKILL the rest after $1 seconds.
wait_gone() {
    local timeout=$1 comm=$2
    shift 2
    local deadline pid left
    deadline=$(($(date +%s) + timeout))
    while :; do
        left=()
        for pid in "$@"; do
            pid_alive "$pid" "$comm" && left+=("$pid")
        done
        ((${#left[@]} == 0)) && return 0
        if (($(date +%s) >= deadline)); then
            warn "$comm (pid ${left[*]}) did not exit after SIGTERM within ${timeout}s; sending SIGKILL"
            kill -KILL "${left[@]}" 2>/dev/null || true
            sleep 0.2
            return 0
        fi
        sleep 0.05
    done
}

# Stop our daemons given by name, all at once, and wait for them.
stop_daemons() {
    local timeout=$1
    shift
    local n pid pids=() comms=()
    for n in "$@"; do
        if pid=$(pid_of "$n"); then
            kill -TERM "$pid" 2>/dev/null || true
            pids+=("$pid")
            comms+=("$(comm_for "$n")")
        fi
        rm -f "$(pidfile_for "$n")"
    done
    local i
    for i in "${!pids[@]}"; do
        wait_gone "$timeout" "${comms[$i]}" "${pids[$i]}"
    done
}

slurm_up() { timeout 5 scontrol ping 2>/dev/null | grep -q 'is UP'; }

# Cancel every job and wait until the queue is empty (slurmstepd outlives
# slurmd otherwise).
cancel_all_jobs() {
    local ids deadline
    ids=$(timeout 10 squeue -h -o '%A' 2>/dev/null) || return 0
    [[ -n $ids ]] || return 0
    log "cancelling $(wc -w <<<"$ids") job(s)"
    # shellcheck disable=SC2086
    timeout 10 scancel $ids 2>/dev/null || true
    deadline=$(($(date +%s) + 30))
    while [[ -n $(timeout 10 squeue -h -o '%A' 2>/dev/null) ]]; do
        if (($(date +%s) >= deadline)); then
            warn "jobs still in the queue after 30 s:"
            timeout 10 squeue >&2 || true
            return 0
        fi
        sleep 0.1
    done
}

# Stop everything up.sh started, in dependency order.
cluster_stop() {
    local slurmds n
    mapfile -t slurmds < <(our_daemons | grep '^slurmd-' || true)
    if pid_of slurmctld >/dev/null && slurm_up; then
        cancel_all_jobs
    fi
    # sshd's per-connection children first, then the listener; this runs
    # while the slurm daemons shut down.
    local sshd_pid
    if sshd_pid=$(pid_of sshd); then
        pkill -TERM -P "$sshd_pid" 2>/dev/null || true
    fi
    # slurmctld and all slurmd need a few seconds each after SIGTERM, so they
    # are stopped together.
    stop_daemons 20 slurmctld sshd "${slurmds[@]}"
    stop_daemons 20 slurmdbd
    stop_daemons 30 mariadbd
    stop_daemons 10 munged
    # shellcheck disable=SC2046
    stop_daemons 5 $(bridge_names)
    rm -f "$RUN/config.sha"
    # The cluster's user runs nothing but jobs: what still runs as it outlived its job's step (a
    # real srtctl orchestrator waiting on services that are gone ignores SIGTERM).
    # (-r: running or sleeping ones; a zombie is its parent's to reap, and cannot be killed.)
    if pgrep -u "$TEST_USER" -r R,S,D,T,t >/dev/null 2>&1; then
        warn "ending processes of $TEST_USER that outlived their jobs: $(pgrep -u "$TEST_USER" -r R,S,D,T,t | tr '\n' ' ')"
        pkill -TERM -u "$TEST_USER" -r R,S,D,T,t 2>/dev/null || true
        for _ in $(seq 50); do pgrep -u "$TEST_USER" -r R,S,D,T,t >/dev/null 2>&1 || break; sleep 0.1; done
        pkill -KILL -u "$TEST_USER" -r R,S,D,T,t 2>/dev/null || true
    fi
    # Whatever still runs in the namespace keeps it alive; an empty one is removed.
    if [[ -z $(ip netns pids "$NETNS" 2>/dev/null) ]]; then
        ip netns del "$NETNS" 2>/dev/null || true
    fi
    if pgrep -x slurmstepd >/dev/null 2>&1; then
        warn "slurmstepd processes are still running: $(pgrep -x slurmstepd | tr '\n' ' ')"
    fi
}
