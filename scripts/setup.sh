#!/usr/bin/env bash
# Set up the Python environment in .venv (idempotent). torch==2.13.0 is installed first so
# that the CPU build on this machine is used and no multi-GB CUDA build is pulled.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
# The extra to install: `test` (everything the tests need) unless named; scripts/main.sh names `main`
# (the main job's: training, the code sandbox's client, tables and figures), a minute less to set up.
extra=${1:-test}
stamp=.venv/.daca-bench-installed-$extra
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/pip install -q --upgrade pip
  if ! .venv/bin/python -c "import torch" 2>/dev/null; then
    .venv/bin/pip install -q "torch==2.13.0"
  fi
  .venv/bin/pip install -q -e ".[$extra]"
  touch "$stamp"
fi
