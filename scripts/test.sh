#!/usr/bin/env bash
# Set up everything the tests need (venv, Docker engine and the sandbox image), then run the
# whole suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [ -f scripts/setup_docker.sh ] && [ "${DACA_BENCH_SKIP_DOCKER:-0}" != 1 ]; then
  bash scripts/setup_docker.sh
fi
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
exec .venv/bin/python -m pytest "$@"
