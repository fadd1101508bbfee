"""Where a training step runs: the torchrun world (gradients averaged, rewards gathered), the
precision of its passes (bf16 autocast, `train.precision`) and the run's metadata (git hash,
package versions) written beside its config."""
from __future__ import annotations

import os
import subprocess
import sys
from contextlib import nullcontext
from pathlib import Path

import torch
import torch.distributed as dist

from .. import __version__


def rank_and_world():
    return (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)


def init_distributed():
    if "WORLD_SIZE" in os.environ and int(os.environ["WORLD_SIZE"]) > 1 and not dist.is_initialized():
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")


def allreduce_grads(model):
    rank, world = rank_and_world()
    if world == 1:
        return
    for p in model.parameters():
        if p.grad is not None:
            dist.all_reduce(p.grad)
            p.grad /= world


def gather_rewards(r: torch.Tensor) -> torch.Tensor:
    rank, world = rank_and_world()
    if world == 1:
        return r
    parts = [torch.empty_like(r) for _ in range(world)]
    dist.all_gather(parts, r)
    return torch.cat(parts)


def git_hash() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                              cwd=Path(__file__).parent, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def versions() -> dict:
    import transformers

    return {"daca_bench": __version__, "torch": torch.__version__, "transformers": transformers.__version__,
            "python": sys.version.split()[0]}


def is_main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


PRECISIONS = {"auto": "auto", "bf16": "bf16", "fp32": "fp32"}


def bf16_is_fast(device) -> bool:
    """CUDA, or a CPU with AMX or AVX-512 bf16 (where bf16 matmuls run in hardware)."""
    if device.type == "cuda":
        return True
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return " amx_bf16" in flags or " avx512_bf16" in flags


def autocast(device, precision: str = "auto", grad: bool = False):
    """bf16 autocast (train.precision), fp32 master weights either way. auto: bf16 for the passes
    without gradients (rollouts, old/reference log-probs) where the hardware runs bf16, and for
    the update only on CUDA: on CPU, bf16 backward was slower than fp32 (BENCHMARKS.md)."""
    fast = bf16_is_fast(device)
    use = precision == "bf16" or (precision == "auto" and fast and (not grad or device.type == "cuda"))
    return torch.autocast(device.type, dtype=torch.bfloat16) if use else nullcontext()
