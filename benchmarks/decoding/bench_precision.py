"""fp32 vs bf16 autocast (train.precision) for the tiny model's rollouts and updates, side by side
in one run, interleaved so that drift in the machine's load hits both settings alike; plus how
often greedy decoding agrees between the two, and the thread layouts of a grid.

    .venv/bin/python benchmarks/decoding/bench_precision.py [--init runs/reproduce/sft/<task>-<hash>/final]
        [--task sudoku_tiny --gen-length 18] [--steps 6] [--threads 1]

Prints Markdown rows for BENCHMARKS.md: median seconds per phase of a GRPO step (B=8, G=8)
for baseline (K=1) and +SML (K=4), the speed-up, and greedy agreement on 256 test prompts.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import torch

from daca_bench.config import RLConfig, apply, load_config
from daca_bench.engine.policy import load_initial
from daca_bench.engine.runtime import autocast
from daca_bench.registry import get_task
from daca_bench.rl.sampler import sample
from daca_bench.train.trainer import PassCounter, train_step

PHASES = ("rollout", "likelihood_old", "update")


def _steps(cfg, adapter, task, prompts, n):
    opt = torch.optim.AdamW(adapter.model.parameters(), lr=cfg.train.lr)
    counter = PassCounter(adapter.model)
    return [train_step(adapter, None, cfg, prompts, task, s, opt, counter) for s in range(n)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--init", default="")
    ap.add_argument("--task", default="sudoku_tiny")
    ap.add_argument("--gen-length", type=int, default=18)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--compile", action="store_true", help="also time a torch.compile'd rollout against eager")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    root = Path(__file__).resolve().parents[2]
    L = args.gen_length
    canvas = {"gen_length": L, "block_length": L, "steps": max(1, L // 2)}
    cfg = apply(
        load_config(root / "configs/tiny.yaml", [], RLConfig),
        {"train.init": args.init, "train.task": args.task, "rollout": canvas, "eval": canvas},
    )
    task = get_task(args.task, split="train", seed=0)
    prompts = list(task.samples)[: cfg.train.prompts_per_step]
    date = subprocess.run(["date", "-u", "+%F %H:%M UTC"], capture_output=True, text=True).stdout.strip()
    cpu = next(
        (
            ln.split(":", 1)[1].strip()
            for ln in Path("/proc/cpuinfo").read_text().splitlines()
            if ln.startswith("model name")
        ),
        platform.machine(),
    )
    print(
        f"{cpu}, {torch.get_num_threads()} thread(s), torch {torch.__version__}, {date}; "
        f"{args.task} L={L} T={L // 2}, init={args.init or 'random tiny'}; "
        f"median of {args.steps} steps after 1 warm-up, fp32 and bf16 interleaved"
    )
    print("| variant | precision | " + " | ".join(PHASES) + " | step s | speed-up |")
    print("|---|---|" + "---:|" * (len(PHASES) + 2))
    for name, over in (("baseline", {}), ("+SML K=4", {"sml.k": 4})):
        vcfg = apply(cfg, over)
        med = {}
        runs = {p: (load_initial(vcfg), apply(vcfg, {"train.precision": p})) for p in ("fp32", "bf16")}
        rows = {p: [] for p in runs}
        for _ in range(args.steps + 1):  # interleave: one step of each per round
            for p, (adapter, pcfg) in runs.items():
                rows[p] += _steps(pcfg, adapter, task, prompts, 1)
        for p in runs:
            med[p] = {ph: statistics.median(r.get(f"seconds_{ph}", 0.0) for r in rows[p][1:]) for ph in PHASES}
        for p in runs:
            step = sum(med[p].values())
            print(
                f"| {name} | {p} | " + " | ".join(f"{med[p][ph]:.3f}" for ph in PHASES) + f" | {step:.3f} | "
                f"{sum(med['fp32'].values()) / step:.2f}x |"
            )
    # greedy agreement and evaluation speed on the test set
    adapter = load_initial(cfg)
    adapter.model.eval()
    test = [s.prompt for s in get_task(args.task, split="test", n=256, seed=0).samples]
    out = {}
    for p in ("fp32", "bf16", "fp32", "bf16"):
        t0 = time.perf_counter()
        with autocast(adapter.device, p):
            texts = sample(adapter, test, replace(cfg.eval, temperature=0.0), seed=0, record=False).texts
        out.setdefault(p, []).append(time.perf_counter() - t0)
        out[p + "_texts"] = texts
    same = sum(a == b for a, b in zip(out["fp32_texts"], out["bf16_texts"]))
    print(
        f"\ngreedy decoding of 256 test prompts: fp32 {min(out['fp32']):.2f} s, bf16 {min(out['bf16']):.2f} s; "
        f"identical completions {same}/256"
    )
    if args.compile:
        _compare_compile(adapter, prompts, cfg)


def _compare_compile(adapter, prompts, cfg) -> None:
    """One rollout batch (B x G completions, fp32) eager, then torch.compile'd: warm-up and speed."""
    rows = [s.prompt for s in prompts for _ in range(cfg.train.num_generations)]

    def rollout() -> float:
        t0 = time.perf_counter()
        sample(adapter, rows, cfg.rollout, seed=0, record=False)
        return time.perf_counter() - t0

    eager = min(rollout() for _ in range(4))
    adapter.model = torch.compile(adapter.model, dynamic=True)
    first = rollout()
    compiled = min(rollout() for _ in range(4))
    print(
        f"rollout of {len(rows)} completions: eager {eager:.3f} s; torch.compile first call {first:.1f} s, "
        f"then {compiled:.3f} s ({eager / compiled:.2f}x)"
    )


if __name__ == "__main__":
    main()
