"""Per-step curves of a grid's runs, read from each cell's metrics.jsonl (plots.py draws the gains):

    curves = load_curves("results/tiny-full/cells")
    plot_curves(curves)     # train reward, and test accuracy during training (train.eval_every) and at the end
    plot_training(curves)   # KL, clip ratio, completion length and zero-std share per step
    plot_compute(compute_points("results/tiny-compute/cells"))  # accuracy against training FLOPs and samples

One facet per (task, rollout setting, base method), wrapping after MAX_COLS columns; in a facet one
line per variant (its PALETTE colour): the mean over seeds, with a band of ± 1 s.d. over seeds. A
grid of many variants (a readings sweep) gets a facet per variant, drawn against the baseline.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from scipy import stats as sps

from ..analysis.accuracy import checked_accuracy
from ..analysis.budgets import evaluations
from ..analysis.cellstore import cells
from .layout import colour, facets, grid_of, legend_outside, variant_rank

TRAINING = {
    "kl": "KL to the\nreference",
    "clip_frac": "clip ratio\n(region mean)",
    "completion_length": "completion\nlength (tokens)",
    "zero_std_groups": "zero-std\ngroups (share)",
}
LOGGED = ("reward_mean", "test_accuracy", *TRAINING)  # the metrics.jsonl keys load_curves keeps
SMOOTH = 5  # steps in the rolling mean of each seed's training metrics
MAX_LINES = 5  # variants besides the baseline in one facet; more: a facet per variant
FACET = ["task", "setting", "base"]


def load_curves(folder: str | Path) -> pd.DataFrame:
    """One row per logged step of every cell (LOGGED's keys; test_accuracy where the step evaluated,
    train.eval_every), plus one row per finished cell at its last step with the final test accuracy
    (`final`: True) from summary.json. `setting`: the cell's rollout setting axis ("" when none)."""
    rows = []
    for cell in (c for c in cells(folder) if c.has("metrics.jsonl")):
        axes = cell.json("axes.json") if cell.has("axes.json") else {}
        cfg = cell.json("config.json")
        common = {
            "cell": cell.name,
            "task": cfg["train"]["task"],
            "setting": str(axes.get("setting", "")),
            "base": cfg["loss"]["base"],
            "variant": axes.get("variant", "run"),
            "seed": cfg["train"]["seed"],
        }
        last = 0
        for m in cell.rows("metrics.jsonl"):
            last = m["step"]
            rows.append({**common, "step": m["step"], **{k: _number(m.get(k)) for k in LOGGED}, "final": False})
        s = cell.json("summary.json") if cell.has("summary.json") else {}
        acc = s.get("test_accuracy")
        acc = (
            checked_accuracy(acc, statuses=s.get("statuses"), where=f"{cell.name}/summary.json")
            if acc is not None
            else None
        )
        if acc is not None and last:
            rows.append({**common, "step": last, **{k: math.nan for k in LOGGED}, "test_accuracy": acc, "final": True})
    return pd.DataFrame(rows)


def _number(v) -> float:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else math.nan


def _keys(curves: pd.DataFrame) -> list[tuple]:
    """The facets, sorted: each (task, setting, base, None) with its rows, all its variants in one
    facet; where it has more than MAX_LINES variants besides the baseline, or two of one colour (the
    readings of one method), a facet (task, setting, base, variant) per variant, drawn with the baseline."""
    c = curves.assign(setting=curves["setting"] if "setting" in curves else "")
    out = []
    for key, g in c.groupby(FACET, sort=True):
        others = [v for v in _variants(g) if v != "baseline"]
        if len(others) > MAX_LINES or len({colour(v) for v in others}) < len(others):
            out += [(*key, v) for v in others]
        else:
            out.append((*key, None))
    return out


def _rows(curves: pd.DataFrame, key: tuple) -> pd.DataFrame:
    task, setting, base, variant = key
    c = curves[(curves["task"] == task) & (curves["base"] == base)]
    c = c[c["setting"] == setting] if "setting" in c else c
    return c if variant is None else c[c["variant"].isin(["baseline", variant])]


def _title(key: tuple) -> str:
    task, setting, base, variant = key
    return f"{base}: {task}" + (f" [{setting}]" if setting else "") + (f"\n{variant} vs baseline" if variant else "")


def _variants(c: pd.DataFrame) -> list[str]:
    return sorted(c["variant"].unique(), key=variant_rank)


def over_seeds(g: pd.DataFrame, column: str, smooth: int = 1) -> pd.DataFrame:
    """Per step: `mean` and `sd` of COLUMN over the seeds (each seed's values smoothed first by a
    SMOOTH-step rolling mean; sd NaN with one seed), their `min` and `max` and `n` seeds, for the
    steps where any logged it."""
    wide = g.pivot_table(index="step", columns="seed", values=column, aggfunc="mean").sort_index()
    if smooth > 1:
        wide = wide.rolling(smooth, min_periods=1).mean()
    out = pd.DataFrame(
        {
            "mean": wide.mean(axis=1),
            "sd": wide.std(axis=1, ddof=1),
            "min": wide.min(axis=1),
            "max": wide.max(axis=1),
            "n": wide.notna().sum(axis=1),
        }
    )
    return out[out["n"] > 0]


def _band(ax, stats: pd.DataFrame, variant: str, **kw) -> None:
    """The mean over seeds as a line, ± 1 s.d. as a band around it, kept within the seeds' range (a
    KL or a share never drawn below 0)."""
    x, m = stats.index.to_numpy(), stats["mean"].to_numpy()
    under = _hidden_by(ax, x, m)
    if under:  # the same line as one drawn: dashed over it, and said on the axes, so that neither hides the other
        kw = {**kw, "ls": (0, (3, 3)), "lw": 1.8}
        notes = sum(t.get_gid() == "same-line" for t in ax.texts)
        ax.text(
            0.99,
            0.03 + 0.1 * notes,
            f"{variant} = {under} (dashed)",
            transform=ax.transAxes,
            ha="right",
            va="bottom",
            fontsize=6,
            color=colour(variant),
            gid="same-line",
        )
    kw = {"lw": 1.4, **kw}
    ax.plot(x, m, color=colour(variant), label=variant, **kw)
    sd = stats["sd"].to_numpy()
    if np.isfinite(sd).any():
        lo = np.maximum(m - np.nan_to_num(sd), stats["min"].to_numpy())
        hi = np.minimum(m + np.nan_to_num(sd), stats["max"].to_numpy())
        ax.fill_between(x, lo, hi, color=colour(variant), alpha=0.14, lw=0)


def _hidden_by(ax, x, m) -> str | None:
    """The label of a line already on AX with the same points (x, m), which a new line would hide; else None."""
    for line in ax.lines:
        lx, ly = np.asarray(line.get_xdata(), dtype=float), np.asarray(line.get_ydata(), dtype=float)
        if (
            not str(line.get_label()).startswith("_")
            and lx.shape == np.shape(x)
            and np.allclose(lx, x)
            and np.allclose(ly, np.asarray(m, dtype=float), equal_nan=True)
        ):
            return str(line.get_label())
    return None


def _handles(variants: list[str], extra: list) -> list:
    """A legend line per colour: the variant's name, or for several of one colour (a method's
    readings, each in its own facet) the method's."""
    by_colour: dict[str, list[str]] = {}
    for v in sorted(set(variants), key=variant_rank):
        by_colour.setdefault(colour(v), []).append(v)
    labels = {
        c: vs[0]
        if len(vs) == 1
        else f"{re.split('[:@]', vs[0])[0]} readings ({len(vs)}; facet titles name them)"
        if len({re.split("[:@]", v)[0] for v in vs}) == 1
        else ", ".join(vs)
        for c, vs in by_colour.items()
    }
    return [Line2D([], [], color=c, lw=2, label=label) for c, label in labels.items()] + extra


def _band_note(curves: pd.DataFrame) -> Patch:
    seeds = curves.groupby(["task", "base", "variant"])["seed"].nunique()
    n = f"{seeds.min()}" if seeds.min() == seeds.max() else f"{seeds.min()}-{seeds.max()}"
    return Patch(color="grey", alpha=0.3, label=f"mean over seeds ({n} per line), band ± 1 s.d.")


def plot_curves(curves: pd.DataFrame, ax=None) -> Figure:
    """Train reward (top; 5-step mean) and test accuracy (bottom) per step, one facet per (task,
    setting, base), a line per variant with its seed band. Test accuracy during training is drawn
    where the runs evaluated (train.eval_every); the final one (summary.json, mean ± s.d. over
    seeds) is a star at the last step, and the panel says which it shows. When no run evaluated
    during training the bottom panel holds only those stars and takes a third of the height."""
    keys = _keys(curves)
    final = curves["final"] if "final" in curves else pd.Series(False, index=curves.index)
    during_any = bool(curves.loc[~final, "test_accuracy"].notna().any()) if "test_accuracy" in curves else False
    fig, stacks = facets(len(keys), 2, (4.2, 2.8), [3, 2] if during_any else [3, 1], ax=ax)
    cols = grid_of(len(keys))[1]
    for i, (key, (top, bottom)) in enumerate(zip(keys, stacks)):
        c = _rows(curves, key)
        ends, c = c[c["final"]] if "final" in c else c.iloc[:0], c[~c["final"]] if "final" in c else c
        variants = _variants(pd.concat([c, ends]))
        span = max(1, int(c["step"].max()) if len(c) else 1)
        during = False
        for j, variant in enumerate(variants):
            g = c[c["variant"] == variant]
            if len(g):
                reward = over_seeds(g, "reward_mean", SMOOTH)
                _band(top, reward, variant, marker="o" if len(reward) < SMOOTH else None, ms=4)
            acc = over_seeds(g, "test_accuracy") if len(g) else pd.DataFrame()
            if len(acc):
                during = True
                _band(bottom, acc, variant, marker="o", ms=3)
            e = ends[ends["variant"] == variant]
            if len(e):
                dodge = (j - (len(variants) - 1) / 2) * 0.012 * span  # stars of one step side by side
                sd = e["test_accuracy"].std(ddof=1) if len(e) > 1 else 0.0
                bottom.errorbar(
                    [e["step"].max() + dodge],
                    [e["test_accuracy"].mean()],
                    yerr=[sd],
                    marker="*",
                    ms=10,
                    ls="",
                    color=colour(variant),
                    elinewidth=1,
                    capsize=2,
                    clip_on=False,
                    label=None if len(acc) else variant,
                )
        note = (
            "final test accuracy (stars: mean ± s.d. over seeds)"
            if not during
            else "test accuracy during training (dots) and at the end (stars)"
        )
        if c.empty and ends.empty:
            note = "no steps logged"
        elif not during and ends.empty:
            note = "no test evaluation (train.eval_every=0 and no summary.json yet)"
        bottom.set_title(note, fontsize=7)
        short = (
            f"\n({int(c['step'].max())} steps: too few for the {SMOOTH}-step mean)"
            if len(c) and c["step"].max() < SMOOTH
            else ""
        )
        top.set_title(_title(key) + short, fontsize=9)
        top.margins(x=0.04)
        if i % cols == 0:
            top.set_ylabel(f"train reward\n({SMOOTH}-step mean)", fontsize=8)
            bottom.set_ylabel("test accuracy", fontsize=8)
        bottom.set_xlabel("step", fontsize=8)
    extra = [_band_note(curves[~final])] if len(curves[~final]) else []
    extra.append(Line2D([], [], marker="*", ms=9, ls="", color="grey", label="final test accuracy, mean ± s.d."))
    if during_any:
        extra.append(
            Line2D([], [], marker="o", ms=4, color="grey", label="test accuracy during training (train.eval_every)")
        )
    legend_outside(fig, _handles(list(curves["variant"]), extra), stacks)
    return fig


def plot_training(curves: pd.DataFrame, ax=None) -> Figure:
    """What TRL and W&B users read beside the reward, per step and per variant (mean over seeds, ±
    1 s.d. band; each seed's values a 5-step mean first): the KL to the reference, the clip ratio
    (clip_frac: TRL's clip_ratio/region_mean), the completion length and the share of groups whose
    rewards all agree (zero_std_groups: no advantage, no gradient). One facet per (task, setting, base)."""
    keys = _keys(curves)
    c_all = curves[~curves["final"]] if "final" in curves else curves
    fig, stacks = facets(len(keys), len(TRAINING), (4.2, 1.35), ax=ax)
    cols = grid_of(len(keys))[1]
    for i, (key, stack) in enumerate(zip(keys, stacks)):
        c = _rows(c_all, key)
        for a, (metric, label) in zip(stack, TRAINING.items()):
            for variant in _variants(c):
                stats = over_seeds(c[c["variant"] == variant], metric, SMOOTH) if metric in c else pd.DataFrame()
                if len(stats):
                    _band(a, stats, variant)
            if not a.lines:
                a.text(0.5, 0.5, f"{metric} not logged", transform=a.transAxes, ha="center", va="center", fontsize=7)
            if i % cols == 0:
                a.set_ylabel(label, fontsize=7)
            a.tick_params(labelsize=7)
            a.margins(x=0.02)
        stack[0].set_title(_title(key), fontsize=9)
        stack[-1].set_xlabel("step", fontsize=8)
    legend_outside(fig, _handles(list(c_all["variant"]), [_band_note(c_all)] if len(c_all) else []), stacks)
    return fig


def compute_points(folder: str | Path) -> pd.DataFrame:
    """One row per evaluation of every cell that evaluated during training (train.eval_every) and
    kept a ledger: its task, base, variant (without a budget), SFT start, seed, step, test accuracy
    and the training FLOPs and completions spent up to that step (budgets.evaluations)."""
    rows = []
    for cell in (c for c in cells(folder) if c.has("summary.json")):
        s = cell.json("summary.json")
        if "ledger" not in s or not cell.has("metrics.jsonl"):
            continue
        axes = cell.json("axes.json") if cell.has("axes.json") else {}
        cfg = cell.json("config.json")
        common = {
            "task": cfg["train"]["task"],
            "base": cfg["loss"]["base"],
            "variant": axes.get("variant", "run"),
            "start": axes.get("sft_start", 0),
            "seed": cfg["train"]["seed"],
        }
        for n, (acc, led) in sorted(evaluations(cell, s).items()):
            rows.append(
                {
                    **common,
                    "step": n,
                    "test_accuracy": acc,
                    "flops": led["flops_train"],
                    "completions": led["completions"],
                }
            )
    return pd.DataFrame(rows)


def band(g: pd.DataFrame) -> tuple[pd.Series, pd.Series, str]:
    """(mean %, half-width %, what the band is) per step of one arm's evaluations G. With two or more SFT
    starts the unit is the start (its mean over seeds): the t-interval over start means, df = starts - 1,
    carries the start term the tables' intervals carry (analysis.budgets.by_start); with one start it is
    over seeds, conditional on that checkpoint."""
    unit = ["step", "start"] if g["start"].nunique() > 1 else ["step", "start", "seed"]
    per = g.groupby(unit)["test_accuracy"].mean().groupby("step")
    m, n, sd = per.mean() * 100, per.count(), per.std() * 100
    half = sps.t.ppf(0.975, np.maximum(n - 1, 1)) * sd.fillna(0) / np.sqrt(n)
    what = (
        f"95 % t-interval over {int(n.max())} SFT starts' means (the start term in)"
        if len(unit) == 2
        else "95 % t-interval over seeds, conditional on one SFT checkpoint"
    )
    return m, half, what


def plot_compute(points: pd.DataFrame):
    """Test accuracy against training FLOPs and against completions, a line per (base, variant): the
    mean at each evaluated step, with band()'s 95 % t-interval (over SFT starts where there are several,
    as the tables' intervals; else over seeds), and the caption saying which."""
    fig = Figure(figsize=(10, 3.6))
    axes = fig.subplots(1, 2)
    whats = set()
    for (task, base, variant), g in points.groupby(["task", "base", "variant"], sort=True):
        by = g.groupby("step")
        m, half, what = band(g)
        whats.add(what)
        for ax, x in zip(axes, ("flops", "completions")):
            xs = by[x].mean() / (1e12 if x == "flops" else 1)
            ax.plot(xs, m, marker="o", ms=3, color=colour(variant), label=f"{base} {variant} ({task})")
            ax.fill_between(xs, m - half, m + half, color=colour(variant), alpha=0.15, lw=0)
    for ax, label in zip(axes, ("training TFLOPs (forward + backward, every phase)", "completions sampled")):
        ax.set_xlabel(label)
        ax.set_ylabel("test accuracy % (exact match)")
        ax.grid(alpha=0.3)
    axes[1].legend(loc="upper left", bbox_to_anchor=(1.02, 1), frameon=False, fontsize=8)
    fig.suptitle("accuracy against compute: mean at each evaluation; band: " + "; ".join(sorted(whats)), fontsize=10)
    fig.tight_layout()
    return fig
