#!/usr/bin/env bash
# The FSDP2 engine on one GPU (benchmarks/gpu/gpu_parallel.py): G1 LoRA replicate vs none at LLaDA-8B's shape,
# G3 full fine-tuning with shard on the ~1.1B gpu_check model, MFU of rollout and update apart.
#   bash benchmarks/gpu/gpu_parallel.sh [--json gpu_parallel.json] [--parts g1 g3] [--steps 2] [--mu 12]
#   PYTHON=.venv/bin/python to pick the interpreter. Without CUDA it stops at once: one line, exit 2.
# At most 8 minutes (timeout below); the JSON is written after each run, so a cut run keeps what it measured.
set -euo pipefail
cd "$(dirname "$0")/../.."
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export PYTORCH_CUDA_ALLOC_CONF=${PYTORCH_CUDA_ALLOC_CONF:-expandable_segments:True}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
exec timeout "${GPU_PARALLEL_TIMEOUT:-480}" "${PYTHON:-python}" -m benchmarks.gpu.gpu_parallel "$@"
