"""Cross-base comparisons (experiments/results.extra_rows): a design that registers a row against
another base's row ("wd1 baseline" vs "grpo +DACA") gets it computed, paired by seed and prompt,
adjusted with its family, and printed in the table's 'across bases' section; a table whose plan
declares none is unchanged."""

import copy

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.multitest import multipletests

from daca_bench.errors import ConfigError
from daca_bench.experiments.analysis.design import across, declared, family_of, validate
from daca_bench.experiments.analysis.render import to_markdown
from daca_bench.experiments.analysis.results import build_table

TASK, SEEDS, PROMPTS = "sudoku_tiny", range(8), 300
# true accuracies: wd1's baseline is 20 pp above grpo's baseline and level with grpo +DACA
RATES = {
    ("grpo", "baseline"): 0.35,
    ("grpo", "+DPS"): 0.35,
    ("grpo", "+DACA"): 0.55,
    ("wd1", "baseline"): 0.55,
    ("wd1", "+DACA"): 0.55,
}
DESIGN = {
    "schema": 1,
    "preset": "two-bases",
    "commit": "abc1234",
    "alpha": 0.05,
    "multiplicity": "holm",
    "bar": "Holm-adjusted p < 0.05 within each family",
    "families": {
        "sudoku": {
            "task": TASK,
            "seeds": list(SEEDS),
            "steps": 32,
            "test": {"split": "test", "size": PROMPTS, "seed": 0, "draw": "first 300"},
        }
    },
    "comparisons": {
        "primary": [{"family": "sudoku", "variant": "+DACA", "vs": "baseline"}],
        "secondary": [
            {"family": "sudoku", "variant": "+DPS", "vs": "baseline"},
            {"family": "sudoku", "base": "wd1", "variant": "baseline", "vs": "grpo baseline"},
            {"family": "sudoku", "base": "wd1", "variant": "baseline", "vs": "grpo +DACA"},
            {"family": "sudoku", "base": "grpo", "variant": "+DACA", "vs": "wd1 +DACA"},
        ],
    },
}


def grid(seed: int = 0) -> pd.DataFrame:
    """load_results' frame for a two-base grid: per-prompt 0/1 rewards on one shared test set, a
    prompt's difficulty shared by every cell, a seed's offset shared by its cells."""
    rng = np.random.default_rng(seed)
    hard = rng.normal(0, 1.0, PROMPTS)  # (prompts,)
    rows = []
    for s in SEEDS:
        shift = rng.normal(0, 0.15)
        for (base, variant), rate in RATES.items():
            logit = np.log(rate / (1 - rate)) + shift - hard  # (prompts,)
            won = rng.random(PROMPTS) < 1 / (1 + np.exp(-logit))
            prompts = {f"p{i}": int(w) for i, w in enumerate(won)}
            rows.append(
                {
                    "cell": f"{base}_{variant}_{s}",
                    "task": TASK,
                    "family": "constraint",
                    "base": base,
                    "variant": variant,
                    "seed": s,
                    "test_accuracy": float(np.mean(won)),
                    "zero_std": 0.1,
                    "prompts": prompts,
                }
            )
    return pd.DataFrame(rows)


def test_the_planted_cross_base_difference_is_found_and_the_null_one_is_not():
    df = grid()
    table = build_table(df, planned=declared(validate(copy.deepcopy(DESIGN))))
    cross = table[table["vs"].map(across)].set_index(["base", "variant", "vs"])
    assert len(cross) == 3 and set(cross["plan"]) == {"secondary"}
    planted, null = cross.loc[("wd1", "baseline", "grpo baseline")], cross.loc[("wd1", "baseline", "grpo +DACA")]
    assert planted["sig"] and planted["lo"] > 5
    assert not null["sig"] and null["lo"] < 0 < null["hi"] and null["MDE"] > 0
    # paired by seed and prompt: with every prompt scored, the difference of the two rows' accuracies
    acc = df.groupby(["base", "variant"])["test_accuracy"].mean()
    assert planted["delta_pp"] == pytest.approx(100 * (acc["wd1", "baseline"] - acc["grpo", "baseline"]))
    assert planted["prompts"] == PROMPTS and planted["seeds"] == len(SEEDS)
    # Holm runs over the whole secondary family, the cross rows included
    sec = table[table["plan"] == "secondary"]
    assert len(sec) == 3 + 1  # the cross rows and grpo's +DPS row (no RL start here; the +DACA rows are primary)
    assert np.allclose(sec["p_adj"], multipletests(sec["p"], method="holm")[1])
    md = to_markdown(table)
    assert "### across bases and arms" in md and "| wd1 baseline |" in md and "| grpo +DACA |" in md
    assert md.index("### base method: wd1") < md.index("### across bases")


def test_a_plan_without_cross_rows_leaves_the_table_as_it_was():
    df = grid(1)
    plain = build_table(df)  # the default families: +DACA vs baseline, +DPS/+SML vs baseline
    assert not plain["vs"].map(across).any() and "across bases" not in to_markdown(plain)
    planned = build_table(df, planned=declared(validate(copy.deepcopy(DESIGN))))
    own = planned[~planned["vs"].map(across)].reset_index(drop=True)
    cols = ["base", "variant", "vs", "delta_pp", "lo", "hi", "p"]
    pd.testing.assert_frame_equal(own[cols], plain[cols])
    # a registered row whose reference never ran is left out, not faked
    lone = build_table(df[df["base"] == "wd1"], planned=declared(validate(copy.deepcopy(DESIGN))))
    assert not lone["vs"].map(across).any()


def test_a_cross_base_vs_is_validated_and_matched_by_base_and_variant():
    bad = copy.deepcopy(DESIGN)
    bad["comparisons"]["secondary"][0]["vs"] = "grpo +DACA extra"
    with pytest.raises(ConfigError, match="is not '<variant>' or '<base> <variant>'"):
        validate(bad)
    planned = declared(validate(copy.deepcopy(DESIGN)))
    row = {"task": TASK, "base": "wd1", "variant": "baseline", "vs": "grpo baseline"}
    assert family_of(row, planned) == "secondary"
    assert family_of({**row, "base": "espo"}, planned) == "exploratory"  # the design names wd1's row only
    # a one-word vs is the row's own base: "wd1 +DACA" against "wd1 baseline" is the primary row
    assert family_of({**row, "variant": "+DACA", "vs": "wd1 baseline"}, planned) == "primary"


def test_a_replication_matches_cross_rows_by_their_vs_and_the_gains_plot_leaves_them_out():
    from daca_bench.experiments.analysis.replicate import compare_tables
    from daca_bench.experiments.analysis.replication import verdict
    from daca_bench.experiments.figures.plots import plot_gains

    planned = declared(validate(copy.deepcopy(DESIGN)))
    table, again = build_table(grid(), planned=planned), build_table(grid(), planned=planned)
    report = compare_tables(table, again)
    assert len(report) == len(table) and verdict(report).startswith("Identical")
    other = build_table(grid(2), planned=planned)
    report = compare_tables(table, other)
    assert len(report) == len(table) and report["vs_ours"].equals(report["vs_ref"])
    # grpo +DACA against wd1 +DACA is not grpo's own gain: one bar per (base, variant) in the plot
    bars = [p for p in plot_gains(table).axes[0].patches]
    assert len(bars) == 2  # grpo's +DPS and +DACA against its baseline; not grpo +DACA against wd1 +DACA
