#!/usr/bin/env bash
# The main job on the embedded default: set up the venv, then `daca-bench reproduce`: SFT the
# tiny diffusion LM on the default's family, run its grpo x {baseline, +DACA} x seed grid (the
# ablation of every variant is --preset tiny-ablation), print the table (exploratory: its design was
# chosen after looking at these seeds) and write it to a folder of its own (runs/PRESET-DATE,
# never the committed results/PRESET it prints how to compare with). Extra arguments go to
# `daca-bench reproduce`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh main
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
# Docker (the code sandbox) is set up only when the preset has a code family (tiny-full, paper),
# as `reproduce --needs-docker` answers from the preset's families; DACA_BENCH_DOCKER=1 forces it,
# DACA_BENCH_SKIP_DOCKER=1 skips it.
if [ "${DACA_BENCH_SKIP_DOCKER:-0}" != 1 ]; then
  if [ "${DACA_BENCH_DOCKER:-0}" = 1 ] || [ "$(.venv/bin/daca-bench reproduce "$@" --needs-docker 2>/dev/null)" = yes ]; then
    bash scripts/setup_docker.sh
  fi
fi
exec .venv/bin/daca-bench reproduce "$@"
