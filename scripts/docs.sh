#!/usr/bin/env bash
# Build the documentation site (mkdocs.yml) in strict mode into site/ (git-ignored): a broken
# link or anchor, a missing page or a docstring that cannot be rendered fails the build.
# Needs the `docs` extra (in `test`, which scripts/setup.sh installs). Extra arguments go to
# `mkdocs build` (e.g. --site-dir DIR; not -q, which hides the warnings that strict mode counts).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
[ -x "$PY" ] || PY=${PYTHON:-python3}
export NO_MKDOCS_2_WARNING=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
exec "$PY" -m mkdocs build --strict "$@"
