"""Arms at a training budget, the compute each arm spent, and the SFT start as a random effect
(issue 48). Nothing here trains.

- A cell whose axes.json lists `budgets` (steps) and that evaluated there (train.eval_every: its
  per-prompt records in eval-stepN.jsonl; the last budget is the final eval.jsonl) is one row of the
  table per budget, variant "<variant>@<N>": with a constant learning rate a run's evaluation at
  step N is the N-step run's final one, prompt for prompt (tests/unit/analysis/test_budgets.py), so an 80-step cell
  also gives its 32-step arm. Its ledger is the run's first N steps (rl/ledger.run_ledger).
- `compute_lines`: the ledger of every arm beside the table (training FLOPs, passes, completions,
  reward calls, seconds), so a compute-matched comparison shows what was matched.
- `by_start`: cells of several SFT starts (axes.json `sft_start`) pair by (start, seed); the SE of a
  difference then has a start term, Var(mean) = s2_start/T + s2_seed/N + s2_prompt/P + s2_e/(N P)
  (T starts, N start x seed units, P clusters), from the between-start mean square of the units'
  means (T - 1 df) in place of the units' own, always (no pretest: analysis/power.py, whose
  simulations check the null rate and the power at the stated MDE at 2 and 8 starts).

    rows = budget_rows(row, cell, axes, summary)   # in load_results: one row per budget
    c = by_start(d, groups, clusters=keys)         # stats.compare, with the start's term
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
from scipy import stats as sps

from ...rl.ledger import run_ledger
from .accuracy import checked_accuracy
from .cellstore import Cell, eval_records
from .power import start_se_df
from .stats import Comparison, by_cluster, compare, mde, p_value


def evaluations(cell: Cell, summary: dict) -> dict[int, tuple[float, dict]]:
    """step -> (test accuracy, ledger up to that step) for every evaluation of a finished cell: each
    one during training (train.eval_every) and the final one, metrics.jsonl read once."""
    rows = cell.rows("metrics.jsonl")
    out = {r["step"]: (r["test_accuracy"], run_ledger(rows, upto=r["step"])) for r in rows if "test_accuracy" in r}
    out[summary["steps"]] = (
        checked_accuracy(summary["test_accuracy"], statuses=summary.get("statuses"), where=str(cell)),
        summary.get("ledger"),
    )
    return out


def budget_rows(row: dict, cell: Cell, axes: dict, summary: dict) -> list[dict]:
    """ROW (a finished cell's table row) once per budget in axes["budgets"] (else once, as it is),
    each with its variant "<variant>@<N>", accuracy, per-prompt records and ledger at step N."""
    budgets = axes.get("budgets")
    if not budgets:
        return [{**row, "ledger": summary.get("ledger")}]
    steps = summary["steps"]
    evaluated = evaluations(cell, summary)
    out = []
    for n in budgets:
        path = "eval.jsonl" if n == steps else f"eval-step{n}.jsonl"
        if not cell.has(path) or n not in evaluated:
            raise FileNotFoundError(
                f"{cell.where}: no evaluation at step {n} (train.eval_every must divide the budgets "
                f"{budgets}; the run has {steps} steps)"
            )
        acc, ledger = evaluated[n]
        prompts = eval_records(cell, path)
        out.append(
            {
                **row,
                "variant": f"{row['variant']}@{n}",
                "test_accuracy": checked_accuracy(acc, prompts, where=f"{cell.name}/{path}"),
                "prompts": prompts,
                "ledger": ledger,
            }
        )
    return out


LEDGER = {
    "steps": "steps",
    "flops_train": "train FLOPs",
    "completions": "completions",
    "reward_calls": "reward calls",
    "train_seconds": "train s",
}


def ledger_columns(cells: pd.DataFrame) -> dict:
    """An arm's ledger, mean over its cells: steps, training FLOPs, completions, reward calls and
    training seconds (rollout, old/reference passes, update); {} where no cell has a ledger."""
    kept = [(r["ledger"], r["config"]) for _, r in cells.iterrows() if isinstance(r.get("ledger"), dict)]
    if not kept:
        return {}
    ledgers = [x for x, _ in kept]
    seconds = [sum(p["seconds"] for k, p in x["phases"].items() if k != "eval") for x in ledgers]
    steps = [x.get("steps") or cfg["train"]["steps"] for x, cfg in kept]
    return {
        "steps": float(np.mean(steps)),
        "flops_train": float(np.mean([x["flops_train"] for x in ledgers])),
        "completions": float(np.mean([x["completions"] for x in ledgers])),
        "reward_calls": float(np.mean([x["reward_calls"] for x in ledgers])),
        "train_seconds": float(np.mean(seconds)),
    }


def compute_lines(table: pd.DataFrame) -> list[str]:
    """The ledger of every arm, a markdown block (none when no cell has a ledger)."""
    if "flops_train" not in table or not table["flops_train"].notna().any():
        return []
    rows = table[table["flops_train"].notna()].drop_duplicates(["base", "task", "variant"])
    least = rows.groupby("task")["flops_train"].transform("min")
    lines = [
        "### compute per arm (the cells' ledgers, mean per cell: rl/ledger.py)",
        "",
        "| task | arm | steps | train FLOPs | x least | completions | reward calls | train s |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for (_, r), low in zip(rows.iterrows(), least):
        lines.append(
            f"| {r['task']} | {r['base']} {r['variant']} | {r['steps']:.0f} | {r['flops_train']:.3g} | "
            f"{r['flops_train'] / low:.2f} | {r['completions']:.0f} | {r['reward_calls']:.0f} | "
            f"{r['train_seconds']:.0f} |"
        )
    return lines + [
        "",
        "Train FLOPs: forward and backward, counted by torch.utils.flop_counter in every phase of "
        "training (rollouts, old and reference passes, every SML stratum and inner update), evaluation "
        "apart; reward calls include the evaluations'. Seconds are this machine's.",
        "",
    ]


def by_start(d: np.ndarray, groups, clusters=None, n_boot: int = 2000) -> Comparison:
    """`compare` of a (units, prompts) matrix whose units (rows) come from the SFT starts GROUPS (one
    label per row): with two or more starts the start term is always in its SE and df (power.py: no
    pretest; two starts give one df). One start: `compare` as it is, conditional on that checkpoint."""
    c = compare(d, n_boot=n_boot, clusters=clusters)
    labels = list(groups)
    if len(set(labels)) < 2 or not c.se > 0:
        return c
    x = by_cluster(np.asarray(d, dtype=float), clusters) if clusters is not None else np.asarray(d, dtype=float)
    se, df = start_se_df(x, labels)
    half = float(sps.t.ppf(0.975, df) * se)
    return replace(
        c,
        lo=c.mean - half,
        hi=c.mean + half,
        se=se,
        df=df,
        mde=float(mde(se, df)),
        p=p_value(c.mean, se, df),
        seed_dropped=False,
    )


def starts_line(df: pd.DataFrame) -> str:
    """The footer's count of SFT starts the intervals generalise over ("conditional on one checkpoint")."""
    n = int(df["start"].nunique()) if "start" in df and len(df) else 1
    if n < 2:
        return (
            " SFT starts: one; every interval is conditional on that checkpoint (it generalises over RL seeds "
            "and test prompts, not over SFT starts)."
        )
    return (
        f" SFT starts: {n} (axes.json sft_start); every interval generalises over them, the start a random effect "
        f"always in the model (analysis/power.py: seeds pair within a start; df at most {n - 1})."
    )
