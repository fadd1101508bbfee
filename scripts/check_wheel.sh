#!/usr/bin/env bash
# Build the wheel, install it with its core dependencies only in a fresh venv, and from a
# folder outside the checkout list the tasks and `verify` one task each of the math,
# constraint and json families; then, when the Docker engine answers and the sandbox image is
# built, install the [code] extra too and verify python_tiny in a real container (else say
# why the code family was skipped).
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
# the confirmation's test draws skip the shipped lists of prompts scored before (train.test_exclude)
"$bin/python" -c "from daca_bench.registry import read_excluded; assert len(read_excluded('configs/scored/sudoku_tiny.txt')) > 256" \
  || { echo "check_wheel: configs/scored/ missing from the installed wheel" >&2; exit 1; }

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
check() {  # TASK FAMILY: verify FAMILY.jsonl (one correct, one wrong completion) with the installed wheel
  "$bin/daca-bench" verify "$1" --input "$2.jsonl" --output "$2.scored.jsonl"
  got=$("$bin/python" -c "import json,sys; print(' '.join(json.loads(l)['status'] for l in open(sys.argv[1])))" "$2.scored.jsonl")
  [ "$got" = "correct wrong" ] || { echo "check_wheel: $1 scored '$got', expected 'correct wrong'" >&2; exit 1; }
}
check arithmetic math
check countdown_tiny constraint
check json_tiny json
# the core install stays light: verifying pulled in none of the heavy extras
"$bin/python" - <<'PY'
import sys
from daca_bench.cli import main
assert main(["verify", "arithmetic", "--input", "math.jsonl", "--output", "again.jsonl"]) == 0
heavy = sorted(m for m in ("torch", "transformers", "matplotlib", "docker", "pandas", "datasets") if m in sys.modules)
assert not heavy, f"verify imported {heavy}"
PY
echo "check_wheel: the installed wheel lists its tasks and verifies math, constraint and json"

# the code family needs a running Docker engine and the sandbox image of this recipe
tag=$("$bin/python" -c "from daca_bench.containers.image import image_tag; print(image_tag())")
if ! command -v docker >/dev/null; then
  skip="there is no docker command"
elif ! docker info >/dev/null 2>&1; then
  skip="the Docker engine does not answer (docker info failed)"
elif ! docker image inspect "$tag" >/dev/null 2>&1; then
  skip="the sandbox image $tag is not built (daca-bench sandbox build)"
else
  skip=""
fi
if [ -n "$skip" ]; then
  echo "check_wheel: skipped the code family: $skip"
  exit 0
fi
wheel=$(ls "$work"/dist/*.whl)
"$bin/pip" install -q "$wheel[code]"
cat > code.jsonl <<'JSONL'
{"examples": [[1, 5], [3, 11], [4, 14], [9, 29]], "completion": "3*x+2"}
{"examples": [[1, 5], [3, 11], [4, 14], [9, 29]], "completion": "3*x+1"}
JSONL
check python_tiny code
echo "check_wheel: with the [code] extra the installed wheel verifies python_tiny in the sandbox ($tag)"
