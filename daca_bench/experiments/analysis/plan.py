"""Power planning: how many seeds or test prompts each comparison of a finished grid needs to
reach a target MDE, from the spread it measured.

    daca-bench table results/tiny-full --plan 6    # writes plan.md beside table.md

A comparison's uncertainty has three sources (experiments/analysis/stats.py): seeds (training runs that
go differently), prompts (some test prompts gain, others lose) and their interaction. More
prompts shrink only the prompt and interaction terms, more seeds shrink all three. When the seed
term alone holds the MDE above the target, no test set is large enough, and the plan says so:
the `floor` column is the MDE with these seeds and unlimited prompts. A comparison whose paired
differences are all the same (both arms 0 %) measured no spread: its row says "no spread: nothing
to plan from" and advises no count. The projection assumes
the variance components stay what this run measured (the MDE column is the table's, at this run's
design; the projections are the mixed model's MDE, which is the table's wherever the seed term is
estimated above 0); the prompt unit is the task's cluster
(experiments/analysis/clusters.py). The projection counts clusters, so it cannot say what more prompts
per cluster buy: for sudoku, more puzzles of the same grids shrink only the share of the cluster
term that comes from which puzzles were drawn (on the default, 256 -> 1,024 puzzles of 66 -> 69
grids took baseline vs start's MDE from 6.0 to 4.4 pp), more grids shrink all of it; a component estimated from 8 seeds is
itself uncertain (its 95 % interval runs from about 0.4x to 4x the estimate), so treat the
counts as a guide.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .results import START, comparisons, load_results, load_start, locate
from .stats import by_cluster, components, projected_mde, smallest, table_mde

MAX_SEEDS, MAX_PROMPTS = 1024, 1_000_000
NO_SPREAD = "no spread: nothing to plan from"


def plan_table(folder, target: float, alpha: float = 0.05, power: float = 0.80) -> pd.DataFrame:
    """One row per comparison of FOLDER's table (the RL start has none): its measured MDE, the
    shares of its variance, and the seeds / prompts that would bring its MDE to `target`."""
    cells, _ = locate(folder)
    rows = []
    for common, variant, _, vs, d, keys, _ in comparisons(load_results(cells), load_start(cells)):
        if variant == START or min(d.shape) < 2:
            continue
        prompts = d.shape[1]
        d = by_cluster(d, keys) if keys else d  # (seeds, clusters)
        S, P = d.shape
        comps = components(d)
        parts = np.array([comps[0] / S, comps[1] / P, comps[2] / (S * P)])
        spread = bool(np.ptp(d) > 0 and np.isfinite(parts).all() and parts.sum() > 0)
        share = 100 * parts / parts.sum() if spread else np.full(3, math.nan)
        kw = {"alpha": alpha, "power": power}
        row = {
            "family": common["family"],
            "task": common["task"],
            "base": common["base"],
            "variant": variant,
            "vs": vs,
            "delta_pp": float(d.mean()),
            "seeds": S,
            "prompts": prompts,
            "clusters": P,
            "spread": spread,
            "MDE": table_mde(d, **kw),
            "seed_share": share[0],
            "prompt_share": share[1],
            "resid_share": share[2],
        }
        if spread:
            row.update(
                floor=projected_mde(comps, S, MAX_PROMPTS, **kw),
                seeds_needed=smallest(comps, target, prompts=P, cap=MAX_SEEDS, **kw),
                clusters_needed=smallest(comps, target, seeds=S, cap=MAX_PROMPTS, **kw),
            )
        else:  # every paired difference the same (both arms 0 %, say): no spread, nothing to plan from
            row.update(floor=math.nan, seeds_needed=None, clusters_needed=None)
        rows.append(row)
    out = pd.DataFrame(rows)
    out.attrs.update(target=target, alpha=alpha, power=power)
    return out


def _unreached(n) -> bool:  # None in the rows; NaN once pandas holds the column
    return n is None or (isinstance(n, float) and math.isnan(n))


def plan_markdown(plan: pd.DataFrame) -> str:
    t = plan.attrs.get("target", math.nan)
    head = [
        "family",
        "task",
        "variant",
        "vs",
        "Δpp",
        "seeds x clusters (prompts)",
        "MDE",
        "variance: seed / cluster / resid %",
        "MDE floor (these seeds)",
        f"seeds for MDE ≤ {t:g}",
        f"clusters for MDE ≤ {t:g}",
    ]
    lines = [
        f"### Seeds and prompts for an MDE of at most {t:g} pp",
        "",
        "| " + " | ".join(head) + " |",
        "|---|---|---|---|" + "---:|" * 7,
    ]
    for _, r in plan.iterrows():
        base = "" if r["base"] == "grpo" else f" ({r['base']})"
        if not r.get("spread", True):
            lines.append(
                "| "
                + " | ".join(
                    [
                        r["family"],
                        r["task"],
                        r["variant"] + base,
                        r["vs"],
                        f"{r['delta_pp']:+.1f}",
                        f"{r['seeds']} x {r['clusters']}",
                        *[NO_SPREAD] * 5,
                    ]
                )
                + " |"
            )
            continue
        lines.append(
            "| "
            + " | ".join(
                [
                    r["family"],
                    r["task"],
                    r["variant"] + base,
                    r["vs"],
                    f"{r['delta_pp']:+.1f}",
                    f"{r['seeds']} x {r['clusters']}" + (f" ({r['prompts']})" if r["prompts"] != r["clusters"] else ""),
                    f"{r['MDE']:.1f}",
                    f"{r['seed_share']:.0f} / {r['prompt_share']:.0f} / {r['resid_share']:.0f}",
                    f"{r['floor']:.1f}",
                    ("none: prompts set the floor" if _unreached(r["seeds_needed"]) else f"{int(r['seeds_needed']):,}")
                    + " (at these clusters)",
                    (
                        "none: seeds set the floor"
                        if _unreached(r["clusters_needed"])
                        else f"{int(r['clusters_needed']):,}"
                    )
                    + " (at these seeds)",
                ]
            )
            + " |"
        )
    if len(plan) and not plan["spread"].any():
        lines[1:1] = [
            "",
            f"{NO_SPREAD}: every paired difference of every comparison is the same (both arms at the same "
            "accuracy on every prompt and seed, 0 % say), so this run measured no variance to project a design "
            "from; first get a start the model can improve on (check the SFT start's accuracy), then plan.",
        ]
    lines += [
        "",
        f"MDE: the smallest true difference found with {100 * plan.attrs.get('power', 0.8):.0f} % power at a "
        f"two-sided {100 * plan.attrs.get('alpha', 0.05):.0f} % level, as in the table. Variance: each source's share of the "
        "variance of the mean difference at this design. MDE floor: the MDE with these seeds and unlimited "
        "test clusters (the seed term alone). A cluster is a test prompt except where a task groups prompts "
        "(sudoku: a solution grid; the 4x4 universe has about 72 test grids: more puzzles of the same grids "
        "shrink only the part of the cluster term that comes from which puzzles were drawn, which these counts "
        "do not project). Counts assume the measured variance components hold at the new design; they are "
        "estimates from this run's seeds, so treat them as a guide.",
    ]
    return "\n".join(lines) + "\n"


def write_plan(folder, target: float) -> tuple[str, object]:
    """Write plan.md beside FOLDER's table.md; return its text and path."""
    _, out = locate(folder)
    text = plan_markdown(plan_table(folder, target))
    path = out / "plan.md"
    path.write_text(text)
    return text, path
