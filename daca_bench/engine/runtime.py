"""Where a training step runs: the precision of its passes (bf16 autocast, `train.precision`) and
the run's metadata (git hash, package versions) written beside its config. The processes of a
torchrun launch and their engine (FSDP2): engine/parallel.py."""

from __future__ import annotations

import functools
import platform
import subprocess
import sys
from contextlib import nullcontext
from pathlib import Path

import torch

from .. import __version__


def git_describe(where: Path = Path(__file__).parent) -> str:
    """`git describe --always --dirty` of the checkout holding the package ('' when not in one):
    the commit a run's config.json names, '-dirty' when tracked files had uncommitted changes."""
    try:
        run = subprocess.run(
            ["git", "describe", "--always", "--dirty"], capture_output=True, text=True, cwd=where, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return run.stdout.strip() if run.returncode == 0 else ""


def versions() -> dict:
    import transformers

    return {
        "daca_bench": __version__,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "python": sys.version.split()[0],
    }


def is_main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


PRECISIONS = {"auto": "auto", "bf16": "bf16", "fp32": "fp32"}
BF16_FLAGS = ("amx_bf16", "avx512_bf16")  # CPU features that run bf16 matmuls in hardware


@functools.cache
def _cpuinfo(field: str) -> str | None:
    """The value of the first `field` line of /proc/cpuinfo ("" without one); None where the file
    cannot be read."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return None
    line = next((x for x in text.splitlines() if x.startswith(field)), "")
    return line.partition(":")[2].strip()


@functools.cache
def cpu_flags() -> frozenset:
    """The CPU's feature flags (the `flags` line of /proc/cpuinfo), read once; empty where
    there is no such file. Tests replace this function to force either branch of `auto`."""
    return frozenset((_cpuinfo("flags") or "").split())


@functools.cache
def cpu_model() -> str:
    model = _cpuinfo("model name")
    return (platform.processor() or platform.machine()) if model is None else (model or platform.machine())


def bf16_is_fast(device, flags=None) -> bool:
    """CUDA, or a CPU with AMX or AVX-512 bf16 (where bf16 matmuls run in hardware). `flags`:
    the CPU's feature flags (default: `cpu_flags()`)."""
    if device.type == "cuda":
        return True
    flags = cpu_flags() if flags is None else flags
    return any(f in flags for f in BF16_FLAGS)


def uses_bf16(device, precision: str = "auto", grad: bool = False, flags=None) -> bool:
    """Whether a pass runs under bf16 autocast: always with bf16, never with fp32; with auto,
    the passes without gradients (rollouts) where the hardware runs bf16, and the passes with
    gradients (old/reference log-probs and updates, taken in one precision) only on CUDA: on
    CPU, bf16 backward was slower than fp32 (BENCHMARKS.md)."""
    fast = bf16_is_fast(device, flags)
    return precision == "bf16" or (precision == "auto" and fast and (not grad or device.type == "cuda"))


def autocast(device, precision: str = "auto", grad: bool = False):
    """bf16 autocast where `uses_bf16` says so (train.precision), fp32 master weights either way."""
    use = uses_bf16(device, precision, grad)
    return torch.autocast(device.type, dtype=torch.bfloat16) if use else nullcontext()


def precision_record(device, precision: str, flags=None) -> dict:
    """What a run's config.json records: the precision each pass actually ran in and what decided
    it (the setting, the device, the CPU and its bf16 features)."""
    flags = cpu_flags() if flags is None else flags
    name = lambda grad: "bf16" if uses_bf16(device, precision, grad, flags) else "fp32"  # noqa: E731
    return {
        "precision_used": {
            "setting": precision,
            "rollout": name(False),
            "old_logprobs": name(True),
            "update": name(True),
            "device": device.type,
            "cpu": cpu_model(),
            "cpu_bf16_flags": sorted(f for f in BF16_FLAGS if f in flags),
        }
    }
