#!/usr/bin/env bash
# The FSDP2 engine on one GPU, in one prepared run of at most 8 minutes:
#   1. benchmarks/gpu/gpu_engine.py, 2 processes sharing the GPU (issue 56: agreed passes under threshold decoding,
#      grad_accum under shard, root resharding, the sharded start-up), at most GPU_ENGINE_TIMEOUT (150) seconds;
#   2. benchmarks/gpu/gpu_parallel.py: G1 LoRA replicate vs none at LLaDA-8B's shape, G3 full fine-tuning with shard
#      on the ~1.1B gpu_check model, MFU of rollout and update apart, in the time left of GPU_PARALLEL_TIMEOUT (480).
#   bash benchmarks/gpu/gpu_parallel.sh [--json gpu_parallel.json] [--parts g1 g3] [--steps 2] [--mu 12]
#   bash benchmarks/gpu/gpu_parallel.sh --cpu     # (or --dry) the same code at toy widths on the CPU, seconds
# Results: gpu_parallel.json (G1, G3), gpu_engine.json, and gpu_parallel.md: both tables, to paste into BENCHMARKS.md.
# PYTHON=.venv/bin/python picks the interpreter. Without CUDA (and without --cpu) it stops at once: one line, exit 2.
# Each JSON is written after each run, so a cut run keeps what it measured.
set -uo pipefail
cd "$(dirname "$0")/../.."
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
export PYTORCH_CUDA_ALLOC_CONF=${PYTORCH_CUDA_ALLOC_CONF:-expandable_segments:True}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
PY=${PYTHON:-python}
cpu=()
args=()
json=gpu_parallel.json
for a in "$@"; do
  case "$a" in
    --cpu | --dry) cpu=(--cpu) ;;
    *) args+=("$a") ;;
  esac
done
for ((i = 0; i < ${#args[@]}; i++)); do [[ ${args[i]} == --json ]] && json=${args[i + 1]}; done
if [[ ${#cpu[@]} -eq 0 ]] && ! "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
  echo "gpu_parallel: no CUDA GPU visible; this benchmark needs one (--cpu runs its code at toy widths)" >&2
  exit 2
fi
start=$SECONDS
total=${GPU_PARALLEL_TIMEOUT:-480}
engine_json=${json%.json}-engine.json
timeout "${GPU_ENGINE_TIMEOUT:-150}" "$PY" -m torch.distributed.run --nproc_per_node 2 --master_port "${MASTER_PORT:-29533}" \
  -m benchmarks.gpu.gpu_engine --json "$engine_json" "${cpu[@]}"
engine_rc=$?
left=$((total - (SECONDS - start)))
toy=()
[[ ${#cpu[@]} -gt 0 ]] && toy=(--toy)
timeout "$left" "$PY" -m benchmarks.gpu.gpu_parallel "${args[@]}" "${toy[@]}" | tee "${json%.json}.log"
parallel_rc=${PIPESTATUS[0]}
{
  [[ -f ${engine_json%.json}.md ]] && cat "${engine_json%.json}.md"
  echo
  sed -n '/^| run | mode/,$p' "${json%.json}.log"
} >"${json%.json}.md"
echo "wrote ${json%.json}.md (engine checks rc $engine_rc, G1/G3 rc $parallel_rc; $((SECONDS - start)) s)"
exit $((engine_rc || parallel_rc))
