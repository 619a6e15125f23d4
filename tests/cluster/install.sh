#!/usr/bin/env bash
# Install the Debian packages the local test cluster needs (Slurm, munge,
# MariaDB + slurmdbd, OpenSSH). Fast no-op when everything is already present.
# Must run as root on a Debian/Ubuntu machine with apt-get.
set -euo pipefail

PACKAGES=(slurmctld slurmd slurm-client slurmdbd munge mariadb-server python3-zmq python3-yaml
          openssh-server openssh-client procps iproute2 socat
          # The serving stack (stack.sh): what srtctl's `make setup` downloads, the headers and
          # compiler for the container stand-in plugin, venvs of the cluster's own Python.
          nats-server etcd-server libslurm-dev gcc libc6-dev python3-venv
          # srtctl starts the Dynamo frontend with `srun --mpi pmix`; Slurm's PMIx plugin
          # dlopens libpmix.so (the -dev package's link).
          libpmix2 libpmix-dev)
# One binary per package group; if all are present, apt-get is skipped.
BINARIES=(/usr/sbin/slurmctld /usr/sbin/slurmd /usr/bin/sbatch /usr/bin/sacct
          /usr/sbin/slurmdbd /usr/sbin/munged /usr/bin/munge /usr/sbin/mungekey
          /usr/sbin/mariadbd /usr/bin/mariadb-install-db /usr/bin/mariadb
          /usr/sbin/sshd /usr/bin/ssh /usr/bin/ssh-keygen /usr/bin/pgrep
          /usr/bin/ss /usr/bin/ip /usr/bin/socat
          /usr/sbin/nats-server /usr/bin/etcd /usr/include/slurm/spank.h /usr/bin/gcc)

log() { printf 'install.sh: %s\n' "$*"; }
die() { printf 'install.sh: error: %s\n' "$*" >&2; exit 1; }

start=$(date +%s.%N)

if [[ $(id -u) -ne 0 ]]; then
    die "must run as root (apt-get install); current uid is $(id -u)"
fi

missing=()
for b in "${BINARIES[@]}"; do
    [[ -x $b || ( $b == *.h && -r $b ) ]] || missing+=("$b")
done
# Jobs on the test cluster run the demo engine (pyzmq) and the srtctl stand-in (PyYAML) under
# the system python3, which has no binary of its own to look for.
/usr/bin/python3 -c 'import zmq, yaml' 2>/dev/null || missing+=("python3-zmq/python3-yaml")
/usr/bin/python3 -c 'import ensurepip, venv' 2>/dev/null || missing+=("python3-venv")
compgen -G '/usr/lib/*/libpmix.so' >/dev/null || missing+=("libpmix-dev")
if [[ ${#missing[@]} -eq 0 ]]; then
    log "all packages already installed ($(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN{printf "%.2f", e-s}') s)"
    exit 0
fi

command -v apt-get >/dev/null 2>&1 || die "apt-get not found; this script supports Debian/Ubuntu only"
log "missing: ${missing[*]}"

# Keep maintainer scripts from starting daemons (there is no init system to
# manage them, and up.sh starts everything itself).
POLICY=/usr/sbin/policy-rc.d
created_policy=0
cleanup() {
    if [[ $created_policy -eq 1 ]]; then
        rm -f "$POLICY"
    fi
}
trap cleanup EXIT
if [[ ! -e $POLICY ]]; then
    printf '#!/bin/sh\nexit 101\n' >"$POLICY"
    chmod 0755 "$POLICY"
    created_policy=1
fi

export DEBIAN_FRONTEND=noninteractive
log "apt-get update"
apt-get update -q
log "apt-get install ${PACKAGES[*]}"
apt-get install -y -q --no-install-recommends \
    -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
    "${PACKAGES[@]}"

still=()
for b in "${BINARIES[@]}"; do
    [[ -x $b || ( $b == *.h && -r $b ) ]] || still+=("$b")
done
if [[ ${#still[@]} -ne 0 ]]; then
    die "still missing after install: ${still[*]}"
fi
log "done in $(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN{printf "%.2f", e-s}') s"
