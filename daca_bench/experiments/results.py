"""Ablation results: load finished cells and build the table researchers read.

    daca-bench table results/grid            # writes table.md, table.csv, table.tex beside the cells

One row per task (grouped by family), one column per variant for each base method: test
accuracy mean with a 95 % t-interval over seeds, and the change against the baseline in
percentage points with a paired 95 % t-interval (seeds paired). Beside it, the paper's
headline "up to" gain for the family.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

PAPER_GAIN_PP = {"math": 5.6, "code": 7.4, "constraint": 36.3, "json": 5.9}  # the abstract's "up to" figures
VARIANT_ORDER = ["baseline", "+DPS", "+SML", "+DACA"]

# two-sided 97.5 % quantiles of Student's t, by degrees of freedom (scipy is not a dependency)
_T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
         12: 2.179, 15: 2.131, 20: 2.086, 30: 2.042}


def t975(df: int) -> float:
    if df <= 0:
        return math.nan
    if df in _T975:
        return _T975[df]
    below = max(k for k in _T975 if k <= df) if df < 30 else None
    return _T975[below] if below else 1.96 + 2.4 / df  # close to the exact value past 30


def interval(values) -> tuple[float, float, float]:
    """Mean and 95 % t-interval half-width of a list (NaN half-width with one value)."""
    vals = [float(v) for v in values if v is not None and not math.isnan(float(v))]
    if not vals:
        return math.nan, math.nan, 0
    m = sum(vals) / len(vals)
    if len(vals) < 2:
        return m, math.nan, len(vals)
    sd = math.sqrt(sum((v - m) ** 2 for v in vals) / (len(vals) - 1))
    return m, t975(len(vals) - 1) * sd / math.sqrt(len(vals)), len(vals)


def load_results(folder: str | Path) -> pd.DataFrame:
    """One row per finished cell: its axes, task, family, variant, base, seed and test accuracy."""
    from ..registry import task_spec

    rows = []
    for summary in sorted(Path(folder).glob("*/summary.json")):
        s = json.loads(summary.read_text())
        if "test_accuracy" not in s:
            continue
        axes_file = summary.parent / "axes.json"
        axes = json.loads(axes_file.read_text()) if axes_file.exists() else {}
        cfg = json.loads((summary.parent / "config.json").read_text())
        try:
            family = task_spec(cfg["train"]["task"]).family
        except KeyError:
            family = axes.get("family", "?")
        rows.append({"cell": summary.parent.name, "task": cfg["train"]["task"], "family": family,
                     "base": cfg["loss"]["base"], "variant": axes.get("variant", _variant_of(cfg)),
                     "seed": cfg["train"]["seed"], "test_accuracy": s["test_accuracy"]})
    return pd.DataFrame(rows)


def _variant_of(cfg: dict) -> str:
    dps, k = cfg["dps"]["enabled"], cfg["sml"]["k"]
    return {(False, True): "baseline", (True, True): "+DPS", (False, False): "+SML", (True, False): "+DACA"}[(dps, k == 1)]


def build_table(df: pd.DataFrame) -> pd.DataFrame:
    """The ablation table: accuracy (%) with intervals and pp change vs the paired baseline."""
    out = []
    for (base, family, task), g in df.groupby(["base", "family", "task"], sort=True):
        row = {"base": base, "family": family, "task": task, "paper_gain_pp": PAPER_GAIN_PP.get(family, math.nan)}
        by_variant = {v: gv.set_index("seed")["test_accuracy"] * 100 for v, gv in g.groupby("variant")}
        baseline = by_variant.get("baseline")
        for variant in [v for v in VARIANT_ORDER if v in by_variant] + sorted(set(by_variant) - set(VARIANT_ORDER)):
            acc = by_variant[variant]
            m, h, n = interval(acc.tolist())
            row[f"{variant} acc"], row[f"{variant} acc ci"], row[f"{variant} n"] = m, h, n
            if baseline is not None and variant != "baseline":
                seeds = sorted(set(acc.index) & set(baseline.index))
                dm, dh, _ = interval([acc[s] - baseline[s] for s in seeds])
                row[f"{variant} dpp"], row[f"{variant} dpp ci"] = dm, dh
        out.append(row)
    return pd.DataFrame(out)


def _fmt(m, h) -> str:
    if m is None or (isinstance(m, float) and math.isnan(m)):
        return "-"
    return f"{m:.1f}" if h is None or math.isnan(h) else f"{m:.1f} ± {h:.1f}"


def _fmt_d(m, h) -> str:
    if m is None or (isinstance(m, float) and math.isnan(m)):
        return "-"
    return f"{m:+.1f}" if math.isnan(h) else f"{m:+.1f} ± {h:.1f}"


def to_markdown(table: pd.DataFrame) -> str:
    lines = []
    for base, t in table.groupby("base", sort=True):
        variants = [v for v in VARIANT_ORDER if f"{v} acc" in t.columns]
        head = ["family", "task"] + [f"{v} acc %" for v in variants] + [f"{v} Δpp" for v in variants[1:]] + ["paper (up to)"]
        lines += [f"### base method: {base}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for _, r in t.sort_values(["family", "task"]).iterrows():
            cells = [r["family"], r["task"]] + [_fmt(r.get(f"{v} acc"), r.get(f"{v} acc ci")) for v in variants]
            cells += [_fmt_d(r.get(f"{v} dpp", math.nan), r.get(f"{v} dpp ci", math.nan)) for v in variants[1:]]
            cells.append(f"+{r['paper_gain_pp']:.1f}" if not math.isnan(r["paper_gain_pp"]) else "-")
            lines.append("| " + " | ".join(str(c) for c in cells) + " |")
        lines.append("")
    lines.append("Accuracy: mean over seeds ± 95 % t-interval half-width; Δpp: paired by seed against the "
                 "baseline. Paper: the abstract's headline gain for the family (LLaDA-8B scale, not this model).")
    return "\n".join(lines) + "\n"


def write_tables(folder: str | Path) -> tuple[pd.DataFrame, list[Path]]:
    folder = Path(folder)
    df = load_results(folder)
    if df.empty:
        raise FileNotFoundError(f"no finished cells (*/summary.json) under {folder}")
    table = build_table(df)
    paths = [folder / "table.md", folder / "table.csv", folder / "table.tex"]
    paths[0].write_text(to_markdown(table))
    table.to_csv(paths[1], index=False)
    paths[2].write_text(table.to_latex(index=False, float_format="%.1f", na_rep="-"))
    return table, paths


# ---- CLI: `daca-bench table` --------------------------------------------------------------
def configure(parser) -> None:
    parser.add_argument("results", help="a grid's output folder (one sub-folder per cell)")


def run(args) -> int:
    table, paths = write_tables(args.results)
    print(paths[0].read_text())
    print("wrote " + ", ".join(map(str, paths)))
    return 0
