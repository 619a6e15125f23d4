#!/usr/bin/env bash
# Run a command inside the test cluster's network namespace (see common.sh), as the cluster's
# daemons and jobs run: its only interface is a loopback, and its own /etc/hosts is bound in a
# mount namespace of the command's own. Not `ip netns exec`, which also remounts /sys and so
# hides the cgroup hierarchy slurmd needs. Every step execs: the command keeps this PID.
set -euo pipefail
NETNS=${SRT_CLUSTER_NETNS:-srt-cluster}
[[ $# -gt 0 ]] || { echo "usage: in-ns.sh COMMAND [ARG...]" >&2; exit 2; }
exec nsenter --net="/run/netns/$NETNS" unshare --mount --propagation slave -- \
    sh -c 'mount --bind "$0" /etc/hosts && exec "$@"' "/etc/netns/$NETNS/hosts" "$@"
