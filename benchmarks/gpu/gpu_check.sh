#!/usr/bin/env bash
# One-command GPU check (see benchmarks/gpu/gpu_check.py): ./benchmarks/gpu/gpu_check.sh [--json out.json] [--toy]
set -euo pipefail
cd "$(dirname "$0")/../.."
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
exec "${PYTHON:-python}" -m benchmarks.gpu.gpu_check "$@"
