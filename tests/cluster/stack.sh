#!/usr/bin/env bash
# Install the real serving stack on the test cluster, for its user: the real srtctl (upstream
# srt-slurm, from ../shared/upstream), what `make setup` would have put beside it, a "container
# image" holding Dynamo's mocker engine and frontend and the sa-bench client, and the container
# stand-in plugin (container/spank_container.c) that lets srtctl's pyxis srun options work.
#
# Idempotent and quick when nothing changed (a stamp per part). Runs as root, before or after
# up.sh: nothing here starts a daemon. Needs PyPI (srtctl's and Dynamo's dependencies) the
# first time; jobs never do.
set -euo pipefail

PROG=stack.sh
# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

require_root "it installs for $TEST_USER and adds a Slurm plugin"
check_settings
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
PY=/usr/bin/python3 # the cluster's own interpreter; a venv of it is executable by every user

TARBALL=${SRT_UPSTREAM_TARBALL:-$SCRIPT_DIR/../../../shared/upstream/srt-slurm-c88ef731.tar.gz}
[[ -r $TARBALL ]] || die "the upstream srt-slurm tarball is not at $TARBALL (set SRT_UPSTREAM_TARBALL)"

for b in gcc nats-server etcd "$PY"; do
    command -v "$b" >/dev/null 2>&1 || die "$b not found; run tests/cluster/install.sh first"
done
[[ -r /usr/include/slurm/spank.h ]] || die "spank.h not found (libslurm-dev); run tests/cluster/install.sh first"

take_lock
install -d -m 0755 "$BASE" "$STACK_LIB" "$IMAGES"
id -u "$TEST_USER" >/dev/null 2>&1 || die "no user $TEST_USER; run up.sh first (it creates the user)"

stamp_ok() { [[ -r $1 && $(cat "$1") == "$2" ]]; }
# As the user, in its own home: the caller's cache and config folders (a test run points
# XDG_CACHE_HOME at a folder of its own) are not the user's to write.
as_user() { runuser -u "$TEST_USER" -- env -u XDG_CACHE_HOME -u XDG_CONFIG_HOME -u XDG_DATA_HOME "$@"; }

# --- the container stand-in ----------------------------------------------------------

plugin_src=$SCRIPT_DIR/container/spank_container.c
plugin=$STACK_LIB/spank_container.so
plugin_conf=$PLUGSTACK_CONF
want=$(sha256sum "$plugin_src" | cut -d' ' -f1)
if ! stamp_ok "$plugin.stamp" "$want" || [[ ! -r $plugin || ! -r $plugin_conf ]]; then
    gcc -shared -fPIC -O2 -Wall -Wextra -Werror -o "$plugin.tmp" "$plugin_src"
    mv -f "$plugin.tmp" "$plugin"
    install -d -m 0755 /etc/slurm/plugstack.conf.d
    grep -qs 'plugstack.conf.d' /etc/slurm/plugstack.conf \
        || printf 'include /etc/slurm/plugstack.conf.d/*.conf\n' >>/etc/slurm/plugstack.conf
    printf '%s\nrequired %s\n' "$MARKER" "$plugin" >"$plugin_conf"
    printf '%s\n' "$want" >"$plugin.stamp"
    log "$(elapsed)s  container stand-in plugin built: $plugin"
fi

# --- srtctl: an editable install of a checkout the user owns ---------------------------

install_srtctl() {
    log "$(elapsed)s  installing srtctl into $SRT_SLURM"
    rm -rf "$SRT_SLURM"
    install -d -o "$TEST_USER" -g "$TEST_USER" -m 0755 "$SRT_SLURM"
    # Read here, unpacked as the user: the user may not be able to reach the checkout's path.
    as_user tar -xzf - -C "$SRT_SLURM" --strip-components=1 <"$TARBALL"
    as_user "$PY" -m venv "$SRT_SLURM/.venv"
    as_user env HOME="$HOME_DIR" "$SRT_SLURM/.venv/bin/pip" install -q --disable-pip-version-check -e "$SRT_SLURM" uv
    # What `make setup` downloads, from this machine's packages instead: nats-server and etcd
    # (Debian), uv (the PyPI wheel's binary).
    install -o "$TEST_USER" -g "$TEST_USER" -m 0755 "$(command -v nats-server)" "$SRT_SLURM/configs/nats-server"
    install -o "$TEST_USER" -g "$TEST_USER" -m 0755 "$(command -v etcd)" "$SRT_SLURM/configs/etcd"
    if command -v etcdctl >/dev/null 2>&1; then
        install -o "$TEST_USER" -g "$TEST_USER" -m 0755 "$(command -v etcdctl)" "$SRT_SLURM/configs/etcdctl"
    fi
    install -d -o "$TEST_USER" -g "$TEST_USER" -m 0755 "$SRT_SLURM/bin"
    install -o "$TEST_USER" -g "$TEST_USER" -m 0755 "$SRT_SLURM/.venv/bin/uv" "$SRT_SLURM/bin/uv.real"
    # The job script runs `uv sync --python 3.12` and `uv run --python 3.12` on the compute node;
    # no CPython 3.12 can be installed offline, so the real uv is given the cluster's Python.
    cat >"$SRT_SLURM/bin/uv" <<'EOF'
#!/bin/sh
# Test-cluster stand-in: the real uv, with the job script's `--python 3.12` replaced by the
# cluster's Python (no CPython 3.12 can be downloaded here). Everything else is passed as is.
real="$(dirname "$0")/uv.real"
n=$#
i=0
prev=""
while [ "$i" -lt "$n" ]; do
    arg=$1
    shift
    if [ "$prev" = "--python" ] && [ "$arg" = "3.12" ]; then
        arg=/usr/bin/python3
    fi
    set -- "$@" "$arg"
    prev=$arg
    i=$((i + 1))
done
exec "$real" "$@"
EOF
    chown "$TEST_USER:$TEST_USER" "$SRT_SLURM/bin/uv"
    chmod 0755 "$SRT_SLURM/bin/uv"
    # Tachometer's scraper is a binary from srt-slurm's GitHub releases (or its Rust sources,
    # not in the tarball); srtctl only checks that it exists unless observability is enabled.
    cat >"$SRT_SLURM/bin/tachometer-scraper" <<'EOF'
#!/bin/sh
echo "tachometer-scraper: not available on this test cluster (no download from GitHub releases)" >&2
exit 1
EOF
    chown "$TEST_USER:$TEST_USER" "$SRT_SLURM/bin/tachometer-scraper"
    chmod 0755 "$SRT_SLURM/bin/tachometer-scraper"
    # The compute-node venv the job script syncs: made now, while PyPI can be reached, so that
    # the job's own `uv sync` finds it up to date (jobs run in the cluster's namespace, offline).
    as_user env HOME="$HOME_DIR" UV_PROJECT_ENVIRONMENT="$SRT_SLURM/.venv-compute" \
        sh -c 'cd "$1" && bin/uv sync --python 3.12 --no-dev -q' sh "$SRT_SLURM"
    as_user tee "$SRT_SLURM/srtslurm.yaml" >/dev/null <<EOF
# Written by tests/cluster/stack.sh for the local test cluster.
cluster: $CLUSTER_NAME
default_partition: $PARTITION
default_time_limit: "00:30:00"
gpus_per_node: 8
use_gpus_per_node_directive: false
use_segment_sbatch_directive: false
containers:
  dynamo-mocker: $DYNAMO_IMAGE.sqsh
EOF
    log "$(elapsed)s  srtctl installed in $SRT_SLURM"
}
# Each part is redone when its inputs or its own code change (its stamp is their hash).
# (The tarball's content, not its path: every checkout of the project has its own.)
want=$( (sha256sum <"$TARBALL"; declare -f install_srtctl) | sha256sum | cut -d' ' -f1)
if ! stamp_ok "$SRT_SLURM/.srt-console-stack" "$want"; then
    install_srtctl
    printf '%s\n' "$want" | as_user tee "$SRT_SLURM/.srt-console-stack" >/dev/null
fi

# --- the image: Dynamo's mocker and frontend, and sa-bench's client --------------------------

# Dynamo's `aisimulate` dependency downloads from outside at install time; the mocker and the
# frontend start without it, so the two wheels go in without dependencies and theirs by name.
DYNAMO=(ai-dynamo==1.6.1 ai-dynamo-runtime==1.6.1)
DYNAMO_DEPS=(aiohttp msgspec prometheus-client pyzmq redis tqdm transformers typing-extensions zstandard
             'kubernetes>=32.0.1,<33' certifi uvloop 'pydantic>=2.10.6,<=2.13.5')
SA_BENCH_DEPS=(aiohttp numpy pandas datasets Pillow tqdm transformers huggingface_hub tokenizers)
install_image() {
    log "$(elapsed)s  building the image $DYNAMO_IMAGE"
    rm -rf "$DYNAMO_IMAGE"
    "$PY" -m venv "$DYNAMO_IMAGE"
    "$DYNAMO_IMAGE/bin/pip" install -q --disable-pip-version-check --no-deps "${DYNAMO[@]}"
    "$DYNAMO_IMAGE/bin/pip" install -q --disable-pip-version-check "${DYNAMO_DEPS[@]}" "${SA_BENCH_DEPS[@]}"
    "$DYNAMO_IMAGE/bin/python" -c 'import dynamo.mocker, dynamo.frontend, aiohttp, pandas, datasets, transformers'
    chmod -R a+rX "$DYNAMO_IMAGE"
    # The file srtctl's preflight and `srun --container-image` see; the stand-in runs the task
    # from the directory beside it (container/spank_container.c).
    printf 'test-cluster image: its files are the directory %s beside this file\n' "$DYNAMO_IMAGE" \
        >"$DYNAMO_IMAGE.sqsh"
    log "$(elapsed)s  image ready"
}
want=$( (printf '%s\n' "${DYNAMO[@]}" "${DYNAMO_DEPS[@]}" "${SA_BENCH_DEPS[@]}"; declare -f install_image) \
    | sha256sum | cut -d' ' -f1)
if ! stamp_ok "$DYNAMO_IMAGE/.srt-console-stack" "$want"; then
    install_image
    printf '%s\n' "$want" >"$DYNAMO_IMAGE/.srt-console-stack"
fi

log "stack ready in $(elapsed) s: srtctl $SRT_SLURM, image $DYNAMO_IMAGE, plugin $plugin"
