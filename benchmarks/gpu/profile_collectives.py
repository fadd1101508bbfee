"""`daca-bench train` with one step under torch.profiler on every rank: the time each rank spent in
all-gather, reduce-scatter, all-reduce and broadcast during that step, for the 1 -> N scaling
protocol of BENCHMARKS.md ("Scaling out (FSDP2): GPU figures").

    torchrun --nproc_per_node 8 -m benchmarks.gpu.profile_collectives --profile-step 6 --trace-dir runs/prof-8 \\
        -- train --config configs/paper/llada_gsm8k.yaml train.steps=6 --output-dir runs/scale-8

Writes TRACE_DIR/rank{R}.json (the step's wall seconds, per collective kind the GPU kernel seconds
(NCCL) and the host seconds of the c10d calls (NCCL's launches; gloo's whole call on a CPU), and on
CUDA the process's peak allocated and reserved memory up to the end of that step), and with
--chrome TRACE_DIR/rank{R}.trace.json.gz (a Chrome / Perfetto trace). The training itself is
`daca-bench train` unchanged: the profiled step's update is the same.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

KINDS = {
    "all_gather": ("allgather", "all_gather"),
    "reduce_scatter": ("reducescatter", "reduce_scatter"),
    "all_reduce": ("allreduce", "all_reduce"),
    "broadcast": ("broadcast",),
}


def kind_of(name: str) -> str | None:
    low = name.lower()
    for kind, keys in KINDS.items():
        if any(k in low for k in keys):
            return kind
    return None


def summarize(events) -> dict:
    """Per collective kind: GPU kernel seconds (ncclDevKernel_* / ncclKernel_*, self time) and host
    seconds of the c10d calls (`c10d::*` and `_c10d_functional::*` ops, total time: with NCCL the
    launch, with gloo the whole collective), from profiler key averages."""
    out = {k: {"device_s": 0.0, "host_s": 0.0, "calls": 0} for k in KINDS}
    for e in events:
        kind = kind_of(e.key)
        if kind is None:
            continue
        if e.key.startswith(("ncclDevKernel", "ncclKernel")):
            device_us = getattr(e, "self_device_time_total", None)
            if device_us is None:
                device_us = getattr(e, "self_cuda_time_total", 0.0)
            out[kind]["device_s"] += device_us / 1e6
        elif e.key.startswith(("c10d::", "_c10d_functional::")):
            out[kind]["host_s"] += e.cpu_time_total / 1e6
            out[kind]["calls"] += e.count
    return {k: {kk: round(vv, 6) if isinstance(vv, float) else vv for kk, vv in v.items()} for k, v in out.items()}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    cut = argv.index("--") if "--" in argv else len(argv)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile-step", type=int, default=3, help="the step (1-based) to profile")
    ap.add_argument("--trace-dir", type=Path, default=Path("runs/profile"))
    ap.add_argument("--chrome", action="store_true", help="also export each rank's Chrome trace")
    args = ap.parse_args(argv[:cut])
    rest = argv[cut + 1 :]

    import torch
    from torch.profiler import ProfilerActivity, profile

    import daca_bench.train.trainer as trainer
    from daca_bench.cli import main as cli_main

    step_fn = trainer.train_step

    def profiled(*a, **kw):
        step = a[5] if len(a) > 5 else kw["step"]  # 0-based: the step being run
        if step + 1 != args.profile_step:
            return step_fn(*a, **kw)
        par = a[8] if len(a) > 8 else kw.get("par")
        rank, world = (par.rank, par.world) if par is not None else (0, 1)
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
        tick = time.perf_counter()
        with profile(activities=activities) as prof:
            metrics = step_fn(*a, **kw)
            if torch.cuda.is_available():
                torch.cuda.synchronize()
        wall = time.perf_counter() - tick
        args.trace_dir.mkdir(parents=True, exist_ok=True)
        report = {
            "rank": rank,
            "world": world,
            "step": args.profile_step,
            "wall_s": round(wall, 4),
            "seconds": {k[len("seconds_") :]: v for k, v in metrics.items() if k.startswith("seconds_")},
            "collectives": summarize(prof.key_averages()),
            "device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
        }
        if torch.cuda.is_available():  # this process's peaks from its start to the end of the profiled step
            report.update(
                peak_allocated_gb=round(torch.cuda.max_memory_allocated() / 1e9, 3),
                peak_reserved_gb=round(torch.cuda.max_memory_reserved() / 1e9, 3),
            )
        (args.trace_dir / f"rank{rank}.json").write_text(json.dumps(report, indent=2) + "\n")
        if args.chrome:
            prof.export_chrome_trace(str(args.trace_dir / f"rank{rank}.trace.json.gz"))
        return metrics

    trainer.train_step = profiled
    return cli_main(rest)


if __name__ == "__main__":
    sys.exit(main())
