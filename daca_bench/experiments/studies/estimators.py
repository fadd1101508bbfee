"""`daca-bench estimators`: the gradient-level estimator study and the DPS credit study in one
command (docs/estimators.md).

    daca-bench estimators --output-dir results/estimators            # SFT starts cached by `reproduce`
    daca-bench estimators --model sudoku_tiny:rl=runs/rl-sudoku/final --output-dir results/estimators

For each task and model: B prompts x G completions sampled on the task's canvas of the tiny
presets (block = L, steps = L/2, temperature 0.9), GRPO advantages from the task's reward,
then every estimator's policy gradient against the exact decode-order gradient (cosine, norm
ratio, their spread over mask draws, 95 % bootstrap intervals over prompts, cost), the ratio
view after mu exact-gradient AdamW steps, and, for tasks with one right answer, the DPS
credit table. Writes estimators.md, gradients.csv, credit.csv, estimators.json and
gradients.png into the output folder.
"""

from __future__ import annotations

import argparse
import csv
import json
import multiprocessing
import platform
import resource
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import numpy as np
import torch

from ...config import SamplerConfig
from ...errors import ConfigError
from ...rl.credit import NORMS
from .credit_study import credit_rows, wrong_tokens
from .gradients import estimators, exact_estimator, gradient_rows, ratio_rows, rollouts, updated_policy

TASKS = ("sudoku_tiny", "countdown_tiny", "arithmetic")
STUDY_ARGS = ("gen_length", "prompts", "seed", "reward", "group", "draws", "mu", "lr", "dps_norm", "threads")


def canvas(task: str, gen_length: int | None) -> SamplerConfig:
    """block = L = gen_length, steps L/2 when given, else the tiny presets' canvas of the task (presets.family_of)."""
    from ..grid.presets import family_of

    fam = family_of(task)
    if fam is None and not gen_length:
        raise ConfigError(f"task {task!r} has no tiny-preset canvas; give --gen-length L")
    c = (
        {"gen_length": gen_length, "block_length": gen_length, "steps": max(1, gen_length // 2)}
        if gen_length
        else fam.canvas
    )
    return SamplerConfig(temperature=0.9, **c)


def sft_start(task: str, sft_dir: Path) -> Path | None:
    """The SFT start `reproduce` caches for the task's family: runs/reproduce/sft/<task>-<hash>/final for this
    version's config, else the newest finished <task>-*/final there that was SFT'd on the same canvas."""
    from ..grid.pipeline import sft_config, sft_folder
    from ..grid.presets import PRESETS, family_of

    fam = family_of(task)
    if fam is None:
        return None
    final = sft_folder(sft_dir, sft_config(PRESETS["tiny-full"], fam)) / "final"
    if final.exists():
        return final
    same = []
    for folder in Path(sft_dir, "sft").glob(f"{task}-*"):
        try:
            cfg = json.loads((folder / "config.json").read_text())
        except (OSError, ValueError):
            continue
        if (folder / "final").exists() and cfg.get("sampler", {}).get("gen_length") == fam.gen_length:
            same.append(folder / "final")
    return max(same, key=lambda p: p.stat().st_mtime, default=None)


def model_list(tasks, specs, sft_dir) -> list[tuple[str, str, str]]:
    """(task, label, path) for every study: each task's cached SFT start, then every --model TASK[:LABEL]=PATH."""
    out = []
    for task in tasks:
        start = sft_start(task, Path(sft_dir)) if sft_dir else None
        if start:
            out.append((task, "sft", str(start)))
    for spec in specs or []:
        head, sep, path = spec.partition("=")
        task, _, label = head.partition(":")
        if not sep or not path or task not in tasks:
            raise ConfigError(
                f"--model {spec!r}: expected TASK[:LABEL]=PATH with TASK one of --tasks ({', '.join(tasks)})"
            )
        out.append((task, label or Path(path).name, path))
    missing = [t for t in tasks if not any(m[0] == t for m in out)]
    if missing:
        raise ConfigError(
            f"no model for {', '.join(missing)}: run `daca-bench reproduce --preset tiny-confirm` or "
            f"`--preset tiny-full` (they cache the SFT starts under {sft_dir or 'runs/reproduce'}/sft) or give "
            f"--model TASK=PATH"
        )
    return out


def train_prompts(task: str, n: int, seed: int, reward: str):
    from ...registry import get_task

    kw = {"shaping": "dense"} if reward == "dense" else {}
    try:
        t = get_task(task, split="train", n=n, seed=seed, **kw)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"--reward {reward}: task {task!r} has no such reward ({exc}); use --reward exact") from None
    return t, list(t.samples)[:n]


def one_study(task: str, label: str, path: str, args) -> dict:
    """One (task, model) study; runs in a worker process with `args.threads` torch threads."""
    from ...config import ModelConfig
    from ...models import default_device, load_model

    torch.set_num_threads(max(1, args.threads))
    adapter = load_model(ModelConfig(name=path))
    adapter.model.to(default_device())
    cfg = canvas(task, args.gen_length)
    t, samples = train_prompts(task, args.prompts, args.seed, args.reward)
    tick = time.perf_counter()
    ro = rollouts(adapter, samples, t, cfg, args.group, args.seed)
    table = estimators(ro.L, ro.T)
    with torch.no_grad():
        exact = exact_estimator(ro.T).logp(adapter, ro, slice(0, len(ro.samples)), 0).cpu()
    valid = ro.batch.completion_mask
    meta = {
        "task": task,
        "model": label,
        "path": path,
        "L": ro.L,
        "T": ro.T,
        "prompts": ro.prompts,
        "group": ro.group,
        "reward_mean": float(np.nanmean(ro.rewards.numpy())),
        "exact_rate": float(np.mean([s == "correct" for s in ro.statuses])),
        "groups_with_signal": int(sum(bool(ro.adv[ro.rows(b)].abs().sum()) for b in range(ro.prompts))),
        "exact_vs_commit_logp_max_abs": float((exact - ro.batch.trajectory.commit_logp)[valid].abs().max()),
    }
    rows, kept = gradient_rows(adapter, ro, table, args.draws)
    new = updated_policy(adapter, ro, args.mu, args.lr)
    for row, r in zip(rows, ratio_rows(new, ro, table, kept["old"], args.seed)):
        row.update({k: v for k, v in r.items() if k != "estimator"})
    wrong = wrong_tokens(adapter, ro, task)
    credit = (
        credit_rows(adapter, ro, wrong, args.seed, plain=kept["exact"], norm=args.dps_norm) if wrong is not None else []
    )
    meta["seconds"] = round(time.perf_counter() - tick, 1)
    return {"meta": meta, "gradients": rows, "credit": credit}


def _ci(pair, fmt="{:.2f}") -> str:
    return "[" + ", ".join(fmt.format(x) for x in pair) + "]"


def format_tables(studies: list[dict]) -> str:
    out = []
    for s in studies:
        m = s["meta"]
        out += [
            f"### {m['task']}, {m['model']} start (L = {m['L']}, T = {m['T']}, {m['prompts']} prompts x "
            f"{m['group']}; reward mean {m['reward_mean']:.3f}, exact {m['exact_rate']:.1%}, "
            f"{m['groups_with_signal']} groups with signal; {m['seconds']:.0f} s)",
            "",
            "| estimator | passes/seq | s | cosine [95% CI] | sd draws | norm ratio [95% CI] | "
            "log-ratio corr [95% CI] |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in s["gradients"]:
            out.append(
                f"| {r['estimator']} | {r['passes_per_seq']} | {r['seconds']:.2f} | {r['cosine']:.3f} "
                f"{_ci(r['cosine_ci'])} | {r['cosine_sd_draws']:.3f} | {r['norm_ratio']:.2f} "
                f"{_ci(r['norm_ratio_ci'])} | {r['logratio_corr']:.3f} {_ci(r['logratio_corr_ci'])} |"
            )
        if s["credit"]:
            c0 = s["credit"][0]
            out += [
                "",
                f"DPS credit ({c0['failed_seqs']} failed rollouts, {c0['tokens']} tokens, {c0['wrong_tokens']} wrong):",
                "",
                "| DPS score | AUC wrong vs right [95% CI] | AUC within a commit step [95% CI] | "
                "Spearman with commit step | cosine weighted vs plain [95% CI] |",
                "|---|---|---|---|---|",
            ]
            out += [
                f"| {c['score']} | {c['auc']:.3f} {_ci(c['auc_ci'])} | {c['auc_within_step']:.3f} "
                f"{_ci(c['auc_within_step_ci'])} | {c['spearman_commit_step']:+.2f} | "
                f"{c['cosine_weighted_vs_plain']:.3f} {_ci(c['cosine_weighted_vs_plain_ci'])} |"
                for c in s["credit"]
            ]
        out.append("")
    return "\n".join(out)


def _flat(row: dict) -> dict:
    out = {}
    for k, v in row.items():
        if isinstance(v, (tuple, list)):
            out[f"{k.removesuffix('_ci')}_lo"], out[f"{k.removesuffix('_ci')}_hi"] = v
        else:
            out[k] = v
    return out


def _csv(path: Path, rows: list[dict]) -> None:
    with open(path, "w", newline="") as f:
        if rows:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)


FAMILY_STYLE = {
    "mean field": "o",
    "SML random": "s",
    "SML strided": "^",
    "SML commit_order": "v",
    "causal": "D",
    "ELBO": "x",
}


def plot(studies: list[dict], path: Path) -> None:
    from matplotlib.figure import Figure  # no pyplot: no backend is chosen for the caller

    fig = Figure(figsize=(4.2 * len(studies), 7))
    axes = fig.subplots(2, len(studies), squeeze=False)
    for j, s in enumerate(studies):
        for i, (col, label) in enumerate(
            (("cosine", "cosine with the exact gradient"), ("logratio_corr", "log-ratio corr. with the exact one"))
        ):
            ax = axes[i][j]
            for fam, marker in FAMILY_STYLE.items():
                rows = [r for r in s["gradients"] if r["family"] == fam]
                if not rows:
                    continue
                x = np.array([r["passes_per_seq"] for r in rows], float)
                y = np.array([r[col] for r in rows])
                lo, hi = np.array([r[f"{col}_ci"] for r in rows]).T
                ax.errorbar(
                    x,
                    y,
                    yerr=[np.clip(y - lo, 0, None), np.clip(hi - y, 0, None)],
                    fmt=marker,
                    capsize=2,
                    label=fam,
                    alpha=0.8,
                )
            ax.set_xscale("log", base=2)
            ax.set_xlabel("forward passes per sequence")
            ax.set_ylabel(label)
            ax.set_title(f"{s['meta']['task']} ({s['meta']['model']})", fontsize=9)
            ax.axhline(1, color="gray", lw=0.5)
    axes[0][0].legend(fontsize=7)
    fig.suptitle("Estimators: accuracy against cost (95% bootstrap intervals; causal K=T is the exact reference)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def write_outputs(studies: list[dict], meta: dict, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / n for n in ("estimators.md", "gradients.csv", "credit.csv", "estimators.json", "gradients.png")]
    paths[0].write_text(format_tables(studies) + "\n")
    key = ("task", "model")
    _csv(paths[1], [{**{k: s["meta"][k] for k in key}, **_flat(r)} for s in studies for r in s["gradients"]])
    _csv(paths[2], [{**{k: s["meta"][k] for k in key}, **_flat(r)} for s in studies for r in s["credit"]])
    paths[3].write_text(json.dumps({"meta": meta, "studies": studies}, indent=2, default=float) + "\n")
    plot(studies, paths[4])
    return paths


# ---- CLI ------------------------------------------------------------------------------------
def configure(parser) -> None:
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), help=f"tasks (default {' '.join(TASKS)})")
    parser.add_argument(
        "--sft-dir",
        default="runs/reproduce",
        help="where `reproduce` cached the SFT starts (its --work-dir); '' for none",
    )
    parser.add_argument(
        "--model",
        action="append",
        default=[],
        metavar="TASK[:LABEL]=PATH",
        help="another model to study on TASK (e.g. an RL checkpoint's final/; `tiny` = untrained); repeatable",
    )
    parser.add_argument("--prompts", type=int, default=12, help="prompts B per study")
    parser.add_argument("--group", type=int, default=8, help="completions G per prompt")
    parser.add_argument("--draws", type=int, default=3, help="mask draws per random estimator")
    parser.add_argument("--mu", type=int, default=4, help="exact-gradient AdamW steps for the ratio view")
    parser.add_argument("--lr", type=float, default=1e-4, help="their learning rate")
    parser.add_argument("--reward", choices=("dense", "exact"), default="dense", help="the task's reward for A")
    parser.add_argument(
        "--dps-norm", default=None, choices=sorted(NORMS), help="dps.norm of the credit table (default: the config's)"
    )
    parser.add_argument(
        "--gen-length",
        type=int,
        default=None,
        help="canvas L (block L, steps L/2) for every task; default: each task's canvas in the tiny presets",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=2, help="studies run in parallel processes (default 2)")
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads per study (default 1: the tiny model's passes are too small to share)",
    )
    parser.add_argument("--output-dir", type=Path, default=Path("results/estimators"))
    parser.add_argument("--no-progress", action="store_true")


def run(args) -> int:
    from tqdm.auto import tqdm

    if min(args.prompts, args.group, args.draws, args.mu, args.workers, args.threads) < 1:
        raise ConfigError("--prompts, --group, --draws, --mu, --workers and --threads must be at least 1")
    if not args.output_dir.parent.exists():
        raise ConfigError(f"--output-dir {args.output_dir}: folder {args.output_dir.parent} does not exist")
    plan = model_list(args.tasks, args.model, args.sft_dir)
    tick = time.perf_counter()
    fields = argparse.Namespace(**{k: getattr(args, k) for k in STUDY_ARGS})
    workers = max(1, min(args.workers, len(plan)))
    with tqdm(total=len(plan), desc="estimators", disable=args.no_progress) as bar:
        if workers == 1:
            cpu = time.process_time()
            studies = []
            threads = torch.get_num_threads()
            try:
                for p in plan:
                    studies.append(one_study(*p, fields))
                    bar.update(1)
            finally:
                torch.set_num_threads(threads)
            cpu = time.process_time() - cpu
        else:  # one process per study, at most `workers` at a time
            ctx = multiprocessing.get_context("spawn")
            with ProcessPoolExecutor(workers, mp_context=ctx) as pool:
                futures = [pool.submit(one_study, *p, fields) for p in plan]
                for _ in as_completed(futures):
                    bar.update(1)
                studies = [f.result() for f in futures]
            cpu = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
    meta = {
        **{k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items() if k != "func"},
        "seconds": round(time.perf_counter() - tick, 1),
        "cpu_seconds": round(cpu, 1),
        "machine": f"{platform.machine()}, {platform.processor() or platform.system()}",
        "torch": torch.__version__,
    }
    print(format_tables(studies))
    paths = write_outputs(studies, meta, args.output_dir)
    print(f"{meta['seconds']:.0f} s ({meta['cpu_seconds']:.0f} s CPU); wrote " + ", ".join(map(str, paths)))
    return 0
