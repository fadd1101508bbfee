#!/usr/bin/env bash
# The main job on the embedded default: set up the venv, then `daca-bench reproduce`: SFT the
# tiny diffusion LM on the default's family, run the grpo x {baseline, +DPS, +SML, +DACA} x
# family x seed grid, print the table and write results/tiny/. Extra arguments go to
# `daca-bench reproduce`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# The default preset (sudoku) needs no code sandbox; a preset with the code family does
# (tiny-full, paper), so Docker is set up whenever a preset is named, or DACA_BENCH_DOCKER=1.
if [ "${DACA_BENCH_SKIP_DOCKER:-0}" != 1 ] && { [[ " $* " == *" --preset"* ]] || [ "${DACA_BENCH_DOCKER:-0}" = 1 ]; }; then
  bash scripts/setup_docker.sh
fi
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
exec .venv/bin/daca-bench reproduce "$@"
