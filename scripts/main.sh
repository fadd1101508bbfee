#!/usr/bin/env bash
# The main job on the embedded default: set up, then SFT the tiny diffusion LM on the tiny
# arithmetic task and print its held-out accuracy.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
exec .venv/bin/daca-bench sft --config configs/tiny_sft.yaml "$@"
