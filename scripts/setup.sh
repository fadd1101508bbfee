#!/usr/bin/env bash
# Set up the Python environment in .venv (idempotent). torch==2.13.0 is installed first so
# that the CPU build on this machine is used and no multi-GB CUDA build is pulled.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.daca-bench-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/pip install -q --upgrade pip
  if ! .venv/bin/python -c "import torch" 2>/dev/null; then
    .venv/bin/pip install -q "torch==2.13.0"
  fi
  .venv/bin/pip install -q -e ".[test]"
  touch "$stamp"
fi
