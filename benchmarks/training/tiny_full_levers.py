"""Where tiny-full's time goes, and which levers pay: measured side by side in one run on each
family's SFT start (the RL start of tiny-full's cells), one thread, nothing else running.

For every family it times, with the project's sampler and verifiers:
  - a rollout of 64 completions (8 prompts x 8, temperature 0.9) at the preset's sampler steps
    (L / 2) and at L / 4 (fewer steps for short canvases), and the greedy evaluation of 256 test
    prompts at both, with its accuracy (a lever only where the accuracy holds);
  - the evaluation in batches of 64 (the preset's) and of 256 (batched evaluation);
  - for the code family, verifying 64 completions in one sandbox batch (the trainer's way) and
    one sandbox call per completion (the reference way);
  - the SFT start's own cost (its summary), which a second preset with the same family reuses
    (SFT starts are cached by their config);
  - for families without prompt masking (json, code), three RL steps of the baseline and of
    +SML (causal K = 4) with one shared old/reference pass (`train/trainer.same_masks`, what the
    trainer does) and with a pass per inner iteration (the reference way).

    .venv/bin/python benchmarks/training/tiny_full_levers.py --sft-dir runs/reproduce [--families math json]

Writes a Markdown table to stdout (BENCHMARKS.md, "tiny-full: profile and levers").
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def family_levers(label: str, fam, sft_dir: Path, preset) -> list[str]:
    from daca_bench.config import ModelConfig, SamplerConfig
    from daca_bench.eval.evaluate import evaluate
    from daca_bench.experiments.grid.pipeline import sft_config, sft_folder
    from daca_bench.models import load_model
    from daca_bench.registry import get_task
    from daca_bench.rewards.verify import verify_many
    from daca_bench.rl.sampler import sample

    folder = sft_folder(sft_dir, sft_config(preset, fam))
    if not (folder / "final").exists():
        return [f"| {label} | no SFT start in {folder} (run the preset first) | | | | |"]
    adapter = load_model(ModelConfig(name=str(folder / "final")))
    test = get_task(fam.task, split="test", n=256, seed=0)
    train = get_task(fam.task, split="train", n=8, seed=0)
    prompts = [s.prompt for s in train.samples for _ in range(8)]
    base = SamplerConfig(**fam.canvas)
    rows = []
    for steps in (fam.canvas["steps"], max(1, fam.gen_length // 4)):
        roll = replace(base, steps=steps, temperature=0.9)
        sample(adapter, prompts[:8], roll, seed=1, record=True)  # warm-up
        _, t_roll = timed(lambda: sample(adapter, prompts, roll, seed=1, record=True))
        for batch in (64, 256):
            ev = replace(base, steps=steps, batch_size=batch)
            res, t_eval = timed(lambda: evaluate(adapter, test, ev, n=256))
            rows.append(
                f"| {label} | {fam.task} | L={fam.gen_length}, T={steps}, eval batch {batch} | {t_roll:.2f} | "
                f"{t_eval:.2f} | {100 * res['accuracy']:.1f} |"
            )
    if fam.task == "python_tiny":
        comps = [s.target if i % 3 else "x" for i, s in enumerate(list(test.samples)[:64])]
        samples = list(test.samples)[:64]
        verify_many(test.verify, samples[:4], comps[:4])  # the pool's start-up, not timed
        _, t_batch = timed(lambda: verify_many(test.verify, samples, comps))
        _, t_single = timed(lambda: [test.verify(s, c) for s, c in zip(samples, comps)])
        rows.append(
            f"| {label} | sandbox: 64 programs | one batch {t_batch:.2f} s; one call each {t_single:.2f} s "
            f"({t_single / t_batch:.1f}x) | | | |"
        )
    rows += shared_passes(label, fam, folder / "final", preset)
    summary = json.loads((folder / "summary.json").read_text()) if (folder / "summary.json").exists() else {}
    if summary:
        rows.append(
            f"| {label} | SFT start (cached, shared by presets) | {summary.get('steps')} steps, "
            f"{summary.get('train_seconds', float('nan')):.0f} s of training when it ran | | | |"
        )
    return rows


def shared_passes(label: str, fam, start: Path, preset, steps: int = 3) -> list[str]:
    import statistics

    import torch

    from daca_bench.engine.policy import load_initial
    from daca_bench.experiments.grid.pipeline import tiny_cells
    from daca_bench.train import trainer as tr

    one = replace(preset, families={label: fam})
    cells = tiny_cells(one, {label: {"folder": str(start.parent)}}, seeds=(0,))
    rows = []
    for cell in (c for c in cells if c.axes["variant"] in ("baseline", "+SML")):
        cfg = cell.config
        if not tr.same_masks(cfg):
            continue
        task = tr.training_task(cfg)
        prompts = list(task.samples)[: cfg.train.prompts_per_step]
        times = {}
        for name, rule in (("shared", tr.same_masks), ("separate", lambda c: False)):
            real, tr.same_masks = tr.same_masks, rule
            try:
                adapter, reference = load_initial(cfg), load_initial(cfg)
                opt = torch.optim.AdamW(adapter.model.parameters(), lr=cfg.train.lr)
                counter = tr.PassCounter(adapter.model)
                out = [
                    tr.train_step(adapter, reference, cfg, prompts, task, s, opt, counter) for s in range(steps + 1)
                ][1:]
            finally:
                tr.same_masks = real
            times[name] = statistics.median(
                sum(r[f"seconds_{p}"] for p in ("rollout", "verify", "likelihood_old", "update")) for r in out
            )
        rows.append(
            f"| {label} | RL step, {cell.axes['variant']} (mu = 2, beta 0.04) | shared old/reference pass "
            f"{times['shared']:.2f} s; a pass per inner iteration {times['separate']:.2f} s "
            f"({times['separate'] / times['shared']:.2f}x) | | | |"
        )
    return rows


def main() -> None:
    import torch

    from daca_bench.experiments.grid.presets import PRESETS

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--sft-dir", default="runs/reproduce", help="reproduce's work folder (its SFT starts are in sft/ below it)"
    )
    parser.add_argument("--preset", default="tiny-full")
    parser.add_argument("--families", nargs="+", default=None)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    torch.set_num_threads(1)
    preset = PRESETS[args.preset]
    print(
        f"{time.strftime('%Y-%m-%d %H:%M %Z')}, {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores, torch {torch.__version__}, 1 thread, load {os.getloadavg()[0]:.1f}\n"
    )
    print("| family | task | setting | rollout of 64 s | eval of 256 s | eval exact % |")
    print("|---|---|---|---:|---:|---:|")
    for label in args.families or list(preset.families):
        for row in family_levers(label, preset.families[label], Path(args.sft_dir), preset):
            print(row, flush=True)


if __name__ == "__main__":
    main()
