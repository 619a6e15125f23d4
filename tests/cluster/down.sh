#!/usr/bin/env bash
# Stop the local Slurm test cluster started by up.sh: cancel all jobs and
# wait for the queue to drain, then stop slurmctld and the slurmd daemons
# (together), slurmdbd, MariaDB, sshd and munged. Only daemons whose PID files
# up.sh wrote under the base dir are touched; a munged that up.sh reused is
# left running. Idempotent: exits 0 when nothing is up.
set -euo pipefail

PROG=down.sh # used by log()/die() in common.sh
# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

require_root "it stops the daemons up.sh started"
check_settings
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

if [[ ! -d $BASE ]]; then
    log "nothing to stop ($BASE does not exist)"
    exit 0
fi
take_lock

daemons=$(our_daemons | tr '\n' ' ')
if [[ -z $daemons ]]; then
    log "nothing to stop"
    exit 0
fi
log "stopping: $daemons"
cluster_stop
rm -f "$ENV_FILE"
log "down in $(elapsed) s (logs stay in $LOGDIR)"
