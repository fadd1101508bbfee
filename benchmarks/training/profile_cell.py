"""Where a cell of the default spends its time (issue 49, item 1), and the code levers left, side
by side in one run: a baseline and a +DACA training step of `reproduce --preset tiny` (its cells'
configs, from an SFT start) under torch.profiler, the profiled CPU time grouped into matrix
multiplies, attention, elementwise and norm kernels, and the rest (Python, autograd, copies); the
process's imports; then one fwd+bwd of the update's batch (B x G x K canvases) with each lever:
eager attention against SDPA, torch.compile, bf16 autocast.

    .venv/bin/python benchmarks/training/profile_cell.py --init runs/reproduce/sft/sudoku_tiny-<hash>/final [--steps 3]

One thread, as each of `reproduce`'s workers runs. Prints Markdown for BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

GROUPS = {  # profiler op name (substring) -> group
    "matmul": ("aten::mm", "aten::addmm", "aten::bmm", "aten::matmul"),
    "attention": ("scaled_dot_product", "aten::_softmax", "aten::softmax"),
    "elementwise and norms": (
        "gelu",
        "layer_norm",
        "aten::add",
        "aten::mul",
        "aten::sub",
        "aten::div",
        "aten::exp",
        "aten::log",
        "aten::sum",
        "aten::where",
        "aten::logsumexp",
        "aten::gather",
        "aten::max",
        "aten::sort",
        "aten::topk",
        "aten::uniform_",
        "aten::embedding",
    ),
}


def group_of(name: str) -> str:
    return next(
        (g for g, keys in GROUPS.items() if any(k in name for k in keys)),
        "rest (copies, views, optimizer, Python-side ops)",
    )


def cells(init: str) -> dict:
    from daca_bench.experiments.grid.pipeline import tiny_cells
    from daca_bench.experiments.grid.presets import PRESETS

    out = {}
    for c in tiny_cells(PRESETS["tiny"], {"sudoku": {"folder": str(Path(init).parent)}}, seeds=[0]):
        out[c.axes["variant"]] = c.config
    return out


def profile_steps(cfg, steps: int) -> tuple[dict, float, dict]:
    from torch.profiler import ProfilerActivity, profile

    from daca_bench.engine.policy import load_initial
    from daca_bench.registry import get_task
    from daca_bench.train.trainer import PassCounter, train_step

    task = get_task(cfg.train.task, split="train", seed=0)
    prompts = list(task.samples)[: cfg.train.prompts_per_step]
    adapter, reference = load_initial(cfg), load_initial(cfg)
    reference.model.eval().requires_grad_(False)
    opt = torch.optim.AdamW(adapter.model.parameters(), lr=cfg.train.lr)
    counter = PassCounter(adapter.model)
    train_step(adapter, reference, cfg, prompts, task, 0, opt, counter)  # warm-up
    groups: dict[str, float] = {}
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        t0 = time.perf_counter()
        rows = [train_step(adapter, reference, cfg, prompts, task, s, opt, counter) for s in range(1, steps + 1)]
        wall = time.perf_counter() - t0
    for ev in prof.key_averages():
        g = group_of(ev.key)
        groups[g] = groups.get(g, 0.0) + ev.self_cpu_time_total / 1e6
    phases = {
        p: statistics.mean(r.get(f"seconds_{p}", 0.0) for r in rows) for p in ("rollout", "likelihood_old", "update")
    }
    return groups, wall, phases


def levers(cfg, reps: int = 5) -> tuple[tuple[int, int], list[tuple[str, float]]]:
    """One fwd+bwd of CFG's update batch (B x G x K canvases of the task's prompt plus the canvas) on
    the cell's own model (engine/policy.load_initial), median of REPS, per lever; and that batch's shape."""
    from daca_bench.engine.policy import load_initial
    from daca_bench.registry import get_task

    prompt = next(iter(get_task(cfg.train.task, split="train", seed=0).samples)).prompt

    def build(impl="sdpa"):
        adapter = load_initial(cfg)
        adapter.model.set_attn_implementation(impl)
        return adapter

    adapter = build()
    batch = cfg.train.prompts_per_step * cfg.train.num_generations * cfg.sml.k
    length = len(adapter.tokenizer(prompt)["input_ids"]) + cfg.rollout.gen_length
    ids = torch.randint(0, adapter.model.config.vocab_size, (batch, length))
    mask = torch.ones(batch, length, dtype=torch.long)

    def time_it(model, bf16=False):
        ts = []
        for _ in range(reps + 1):
            t = time.perf_counter()
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                out = model(input_ids=ids, attention_mask=mask).logits
            out.float().logsumexp(-1).sum().backward()
            ts.append(time.perf_counter() - t)
        return statistics.median(ts[1:])

    out = [
        ("SDPA (as shipped), fp32", time_it(adapter.model)),
        ("eager attention, fp32", time_it(build("eager").model)),
        ("SDPA, bf16 autocast", time_it(adapter.model, bf16=True)),
    ]
    compiled = torch.compile(build().model)
    t = time.perf_counter()
    time_it(compiled)
    first = time.perf_counter() - t
    out.append((f"torch.compile (inductor; first call {first:.0f} s)", time_it(compiled)))
    return (batch, length), out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--init", required=True, help="the default's SFT start (runs/reproduce/sft/sudoku_tiny-*/final)")
    ap.add_argument("--steps", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(1)
    imports = subprocess.run(
        [
            sys.executable,
            "-c",
            "import time; t = time.perf_counter(); "
            "import daca_bench.train.trainer, daca_bench.experiments.grid.pipeline; "
            "print(time.perf_counter() - t)",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    print(
        f"torch {torch.__version__}, 1 thread; imports of a worker (torch, transformers, daca_bench): "
        f"{float(imports.stdout):.1f} s\n"
    )
    print(
        "| variant | step s | rollout | old + ref | update | matmul % | attention % | elementwise and norms % "
        "| rest % |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    cfgs = cells(args.init)
    for name in ("baseline", "+DACA"):
        groups, wall, ph = profile_steps(cfgs[name], args.steps)
        total = sum(groups.values())
        pct = {g: 100 * v / total for g, v in groups.items()}
        rest = next(g for g in pct if g.startswith("rest"))
        print(
            f"| {name} | {wall / args.steps:.2f} | {ph['rollout']:.2f} | {ph['likelihood_old']:.2f} | "
            f"{ph['update']:.2f} | {pct.get('matmul', 0):.0f} | {pct.get('attention', 0):.0f} | "
            f"{pct.get('elementwise and norms', 0):.0f} | {pct[rest]:.0f} |"
        )
    (batch, length), rows = levers(cfgs["+DACA"])
    print(f"\nOne fwd+bwd of the update's batch ({batch} x {length} tokens), median of 5:\n")
    print("| lever | seconds | vs shipped |\n|---|---:|---:|")
    for name, sec in rows:
        print(f"| {name} | {sec:.3f} | {rows[0][1] / sec:.2f}x |")


if __name__ == "__main__":
    main()
