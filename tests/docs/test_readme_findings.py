"""Issue 58: README's "What it found" opens with the confirmatory tables, and every confirmatory
number it quotes is the committed table's (rebuilt from its cells: tests/unit/analysis/test_replicate.py); the stale
sentences ("the whole ablation", tiny-compute's "16 seeds per cell") are gone."""

import re

import pandas as pd
import pytest

from repo_paths import ROOT

README = (ROOT / "README.md").read_text()
FOUND = README[README.index("## What it found") : README.index("## The two commands")]


def _fmt(row) -> str:
    return f"{row['delta_pp']:+.1f}{' *' if row['sig'] is True or row['sig'] == 'True' else ''} [{row['lo']:+.1f}, {row['hi']:+.1f}]"


def _rows(name: str) -> pd.DataFrame:
    path = ROOT / "results" / name / "table.csv"
    if not path.is_file():
        pytest.skip(f"results/{name} is not in this checkout")
    return pd.read_csv(path)


def test_the_confirmatory_tables_come_first_and_the_exploratory_ones_below_lighter():
    first = {n: FOUND.index(f"`--preset {n}`") for n in ("tiny-full", "tiny-bases")}
    exploratory = FOUND.index("### Exploratory tables")
    assert max(first.values()) < exploratory < FOUND.index("`tiny-ablation`")
    assert all(
        line.startswith(">")
        for line in FOUND[exploratory:].splitlines()[2:]
        if line.strip() and not line.startswith("These are tiny models")
    )  # a blockquote: visually lighter


def test_readme_quotes_tiny_full_as_its_table_has_it():
    t = _rows("tiny-full")
    for task, area in (
        ("arithmetic_tiny", "math"),
        ("sudoku_tiny", "constraint"),
        ("json_tiny", "JSON"),
        ("python_tiny", "code"),
    ):
        line = next(x for x in FOUND.splitlines() if x.startswith(f"| {area} | **") or x.startswith(f"| {area} | +"))
        for variant in ("baseline", "+DACA"):
            row = t[(t["task"] == task) & (t["variant"] == variant)].iloc[0]
            quoted = (
                _fmt(row).replace(" *", "** *").replace(f"{row['delta_pp']:+.1f}", f"**{row['delta_pp']:+.1f}", 1)
                if row["sig"] in (True, "True")
                else _fmt(row)
            )
            assert quoted in line, (area, variant, quoted, line)
            assert f"MDE {row['MDE']:.1f}" in line or variant == "baseline"


def test_readme_quotes_tiny_bases_and_tiny_compute_as_their_tables_have_them():
    b = _rows("tiny-bases")
    for base in ("grpo", "gspo", "reinforce_pp", "wd1"):
        row = b[(b["base"] == base) & (b["variant"] == "+DACA") & (b["vs"] == "baseline")].iloc[0]
        assert f"**{row['delta_pp']:+.1f}** * [{row['lo']:+.1f}, {row['hi']:+.1f}]" in FOUND
    _rows("tiny-compute")  # the table.md row (its own rounding) of the primary FLOP-matched comparison
    md = (ROOT / "results" / "tiny-compute" / "table.md").read_text()
    cells = next(x for x in md.splitlines() if "| grpo +DACA@32 |" in x and "| grpo baseline@80 |" in x).split(" | ")
    assert f"{cells[4]} {cells[6]}, MDE {cells[7]}" in FOUND


def test_readme_quotes_tiny_compute_starts_as_its_table_has_it():
    t = _rows("tiny-compute-starts")
    planned = {
        ("+DACA@32", "grpo baseline@80"): "",
        ("+DACA@32", "grpo baseline@32"): "",
        ("baseline@80", "grpo baseline@32"): "",
    }
    for variant, vs in planned:
        row = t[(t["variant"] == variant) & (t["vs"] == vs)].iloc[0]
        quoted = _fmt(row)
        if row["sig"] in (True, "True"):
            quoted = quoted.replace(" *", "** *").replace(f"{row['delta_pp']:+.1f}", f"**{row['delta_pp']:+.1f}", 1)
        else:
            quoted = f"**{quoted}**"
        assert quoted in FOUND, (variant, vs, quoted)
    primary = t[(t["variant"] == "+DACA@32") & (t["vs"] == "grpo baseline@80")].iloc[0]
    assert f"MDE {primary['MDE']:.1f} (no difference" in FOUND


def test_the_stale_sentences_are_gone():
    for path in ("README.md", "docs/reproducing.md", "scripts/main.sh"):
        assert "whole ablation" not in (ROOT / path).read_text(), path
    assert not re.search(r"\{baseline, \+DPS, \+SML, \+DACA\} x\s*#?\s*family", (ROOT / "scripts/main.sh").read_text())
    table = ROOT / "results" / "tiny-compute" / "table.md"
    if table.is_file():
        assert "16 seeds per cell" not in table.read_text() and "2 SFT starts x 8 seeds" in table.read_text()
    assert "replicates (" not in FOUND  # no "replicates" without an equivalence test


def test_readme_and_results_quote_tiny_block_as_its_table_and_the_comparison_have_them():
    """Issue 57: README's tiny-block paragraph quotes the committed table's grpo baseline and +DACA rows and
    TraceRL's json row against grpo +DACA; the comparison with the full-attention model is what
    `daca-bench table results/tiny-block --against results/tiny-full` computes from both folders' cells."""
    from daca_bench.experiments.analysis.replicate import compare_tables
    from daca_bench.experiments.analysis.results import load_table

    t = _rows("tiny-block")
    _rows("tiny-full")
    para = FOUND[FOUND.index("`--preset tiny-block`") :]
    para = para[: para.index("\n\n")]
    for base, task, variant, vs in (
        ("grpo", "sudoku_tiny", "baseline", "start"),
        ("grpo", "json_tiny", "baseline", "start"),
        ("grpo", "sudoku_tiny", "+DACA", "baseline"),
        ("grpo", "json_tiny", "+DACA", "baseline"),
        ("tracerl", "json_tiny", "baseline", "grpo +DACA"),
    ):
        row = t[(t["base"] == base) & (t["task"] == task) & (t["variant"] == variant) & (t["vs"] == vs)].iloc[0]
        quoted = _fmt(row)
        if row["sig"] in (True, "True"):
            quoted = quoted.replace(" *", "** *").replace(f"{row['delta_pp']:+.1f}", f"**{row['delta_pp']:+.1f}", 1)
        assert quoted in para, (base, task, variant, quoted)
        if variant == "+DACA":
            assert f"{quoted} (MDE {row['MDE']:.1f})" in para
    report = compare_tables(load_table(ROOT / "results" / "tiny-block"), load_table(ROOT / "results" / "tiny-full"))
    report = report[report["base"] == "grpo"].set_index(["task", "variant"])
    section = (ROOT / "results" / "README.md").read_text()
    section = section[section.index("## `results/tiny-block/`") :]
    for key in (
        ("sudoku_tiny", "+DACA"),
        ("json_tiny", "+DACA"),
        ("sudoku_tiny", "baseline"),
        ("json_tiny", "baseline"),
    ):
        r = report.loc[key]
        diff = f"{r['diff_pp']:+.1f} [{r['diff_lo']:+.1f}, {r['diff_hi']:+.1f}]"
        assert diff in section, (key, diff)
        if key == ("sudoku_tiny", "+DACA"):
            assert diff in para and f"(difference MDE {r['diff_mde']:.1f})" in section
