"""Every table says what each variant ran (issue 45 item 3): under each base's rows, per variant its DPS
score, SML partition and K and the regime keys where the table's variants differ, read from the cells'
configs (a budget row '+DACA@32' is +DACA's); and the paper's "up to" gain stands only beside a shipped
task of an area the paper measured, as in the plots (variants.paper_area): a task of one's own of the
constraint family gets none, registered or not."""

import json
import math
from pathlib import Path

import pytest
from test_task_record import sort4  # noqa: F401 - the fixture: sort4 registered from a task folder

from daca_bench import registry
from daca_bench.experiments.analysis.render import to_csv, to_markdown
from daca_bench.experiments.analysis.results import load_table
from daca_bench.experiments.analysis.variants import method, paper_area, variants_lines
from daca_bench.experiments.figures.plots import paper_area as plots_paper_area

HEADLINE = {"dps": {"enabled": True, "score": "progress"}, "sml": {"k": 4, "partition": "causal"}}
ARMS = {
    "baseline": ({"dps": {"enabled": False, "score": "progress"}, "sml": {"k": 1, "partition": "random"}}, 1e-4),
    "+DPS": ({"dps": {"enabled": True, "score": "surprise"}, "sml": {"k": 1, "partition": "random"}}, 1e-4),
    "+DACA": (HEADLINE, 2e-4),
}


def _cells(folder: Path, task: str, family: str, arms=ARMS, seeds=3, prompts=12, budgets=None) -> None:
    """Cells as the trainer writes them (with their task_record), each prompt its own cluster."""
    ids = [f"{task}/{i}" for i in range(prompts)]
    record = {"name": task, "family": family, "version": 1, "cluster": None, "clusters": {}}
    for variant, (keys, lr) in arms.items():
        for seed in range(seeds):
            cell = folder / f"variant={variant}_seed={seed}"
            cell.mkdir(parents=True)
            rewards = {i: float((seed + k + len(variant)) % 3 == 0) for k, i in enumerate(ids)}
            cfg = {
                "train": {"task": task, "seed": seed, "lr": lr, "mu": 2},
                "loss": {"base": "grpo", "beta": 0.04},
                **keys,
            }
            (cell / "config.json").write_text(json.dumps(cfg))
            (cell / "axes.json").write_text(json.dumps({"variant": variant}))
            (cell / "summary.json").write_text(
                json.dumps({"task": task, "test_accuracy": sum(rewards.values()) / prompts, "task_record": record})
            )
            (cell / "eval.jsonl").write_text(
                "".join(json.dumps({"id": i, "reward": r}) + "\n" for i, r in rewards.items())
            )


def test_the_table_says_what_each_variant_ran(tmp_path):
    _cells(tmp_path / "run", "sudoku_tiny", "constraint")
    table = load_table(tmp_path / "run")
    line = (
        "What each variant of grpo ran (from its cells' configs): baseline: no DPS, no SML (K = 1), lr 0.0001; "
        "+DPS: DPS surprise, no SML (K = 1), lr 0.0001; +DACA: DPS progress, SML causal, K = 4, lr 0.0002."
    )
    text = to_markdown(table)
    assert line in text.splitlines()
    assert text.index("| +DACA |") < text.index(line) < text.index("seeds per cell")  # under the base's rows
    # a shipped task of an area the paper measured: the paper's gain beside its baseline
    assert "| +36.3 |" in text and table.set_index("variant").loc["baseline", "paper_gain_pp"] == 36.3


def test_a_budget_row_is_its_variant_and_differing_cells_are_all_named():
    import pandas as pd

    cfg = lambda score, k: {"dps": {"enabled": True, "score": score}, "sml": {"k": k, "partition": "strided"}}  # noqa: E731
    df = pd.DataFrame(
        [
            {"base": "grpo", "variant": "+DACA@32", "config": cfg("progress", 4), "lr": 1e-4},
            {"base": "grpo", "variant": "+DACA@80", "config": cfg("progress", 4), "lr": 1e-4},
            {"base": "grpo", "variant": "+DPS", "config": cfg("progress", 1), "lr": 1e-4},
            {"base": "grpo", "variant": "+DPS", "config": cfg("random", 1), "lr": 1e-4},
            {"base": "gspo", "variant": "+DPS", "config": cfg("progress", 1), "lr": 3e-4},
        ]
    )
    lines = variants_lines(df)
    assert lines["grpo"] == (
        "What each variant of grpo ran (from its cells' configs): +DPS: DPS progress, no SML "
        "(K = 1) / DPS random, no SML (K = 1), lr 0.0001; +DACA: DPS progress, SML strided, K = 4, "
        "lr 0.0001."
    )
    assert "+DACA@" not in lines["grpo"] and lines["gspo"].endswith("+DPS: DPS progress, no SML (K = 1), lr 0.0003.")
    assert method({"dps": {"enabled": False}, "sml": {"k": 2}}) == "no DPS, SML, K = 2"  # only what the cell recorded


def test_a_custom_task_of_a_paper_family_gets_no_paper_gain_registered_or_not(sort4, tmp_path, monkeypatch):  # noqa: F811
    assert registry.task_spec("sort4").family == "constraint"
    assert math.isnan(paper_area("sort4", "constraint")) and paper_area("sudoku_tiny", "constraint") == 36.3
    assert plots_paper_area is paper_area  # the plots' note and the table's column: one function
    _cells(tmp_path / "run", "sort4", "constraint")
    table = load_table(tmp_path / "run")
    text = to_markdown(table)
    assert "+36.3" not in text and table["paper_gain_pp"].isna().all()
    assert "What each variant of grpo ran" in text
    monkeypatch.delitem(registry._REGISTRY, "sort4")  # a machine that does not know sort4: the same table
    assert to_markdown(load_table(tmp_path / "run")) == text and to_csv(load_table(tmp_path / "run")) == to_csv(table)


@pytest.mark.parametrize("family", ["constraint", "json [prefix]"])
def test_the_paper_gain_of_a_shipped_task_s_setting_block_is_its_family_s(family):
    task = {"constraint": "sudoku_tiny", "json [prefix]": "json_tiny"}[family]
    assert paper_area(task, family) == {"constraint": 36.3, "json [prefix]": 5.9}[family]
