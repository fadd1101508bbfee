#!/usr/bin/env bash
# LLaDA-8B and Dream-7B at full size with random bf16 weights (benchmarks/gpu/gpu_models.py):
#   ./benchmarks/gpu/gpu_models.sh [--json out.json] [--tiny]      PYTHON=.venv/bin/python to pick the interpreter
set -euo pipefail
cd "$(dirname "$0")/../.."
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
exec timeout 290 "${PYTHON:-python}" -m benchmarks.gpu.gpu_models "$@"
