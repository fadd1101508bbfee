#!/usr/bin/env bash
# Build the wheel, install it with its core dependencies only in a fresh venv, and from a
# folder outside the checkout list the tasks and `verify` one task each of the math,
# constraint and json families (plus code when the sandbox image is up).
# Usage: bash scripts/check_wheel.sh   (PYTHON picks the interpreter; default .venv/bin/python)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$PY" -m pip wheel -q --no-deps -w "$work/dist" .
rm -rf build daca_bench.egg-info
"$PY" -m venv "$work/venv"
"$work/venv/bin/pip" install -q "$work"/dist/*.whl

cd "$work"  # outside the checkout: only the installed wheel can answer
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
bin="$work/venv/bin"
"$bin/daca-bench" tasks | tee tasks.txt
for name in arithmetic countdown_tiny json_tiny; do
  grep -q "^$name " tasks.txt || { echo "check_wheel: task $name missing from the installed wheel" >&2; exit 1; }
done

cat > math.jsonl <<'JSONL'
{"expression": "17+5-9", "completion": "<answer>13</answer>"}
{"expression": "2+2", "completion": "5"}
JSONL
cat > constraint.jsonl <<'JSONL'
{"numbers": [3, 5, 7], "target": 22, "completion": "<answer>3*5+7</answer>"}
{"numbers": [3, 5, 7], "target": 22, "completion": "<answer>3+5+7</answer>"}
JSONL
cat > json.jsonl <<'JSONL'
{"schema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}, "completion": "{\"n\": 3}"}
{"schema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}, "completion": "{\"n\": \"x\"}"}
JSONL
for pair in arithmetic:math countdown_tiny:constraint json_tiny:json; do
  task=${pair%%:*} family=${pair##*:}
  "$bin/daca-bench" verify "$task" --input "$family.jsonl" --output "$family.scored.jsonl"
  got=$("$bin/python" -c "import json,sys; print(' '.join(json.loads(l)['status'] for l in open(sys.argv[1])))" "$family.scored.jsonl")
  [ "$got" = "correct wrong" ] || { echo "check_wheel: $task scored '$got', expected 'correct wrong'" >&2; exit 1; }
done
# the core install stays light: verifying pulled in none of the heavy extras
"$bin/python" - <<'PY'
import sys
from daca_bench.cli import main
assert main(["verify", "arithmetic", "--input", "math.jsonl", "--output", "again.jsonl"]) == 0
heavy = sorted(m for m in ("torch", "transformers", "matplotlib", "docker", "pandas", "datasets") if m in sys.modules)
assert not heavy, f"verify imported {heavy}"
PY
echo "check_wheel: the installed wheel lists its tasks and verifies math, constraint and json"
