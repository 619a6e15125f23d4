#!/usr/bin/env bash
# The project's test command: installs what the tests need on a fresh machine (the apt packages
# of the local Slurm cluster and sshd, a venv with the project and its test tools), then runs
# ruff, mypy and pytest. Cluster tests bring the local cluster up themselves (tests/cluster/up.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  bash tests/cluster/install.sh
else
  echo "tests/run.sh: not root or no apt-get: the Slurm cluster tests will be skipped" >&2
fi

python3 -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test]'

if [ -n "${CI:-}" ]; then
  # A CI machine is thrown away afterwards, but its daemons must not outlive the run.
  export SRT_CLUSTER_DOWN_AFTER=1
fi

.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
.venv/bin/lint-imports
.venv/bin/pytest -q -ra "$@"
