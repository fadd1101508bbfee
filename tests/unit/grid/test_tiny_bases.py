"""`reproduce --preset tiny-bases`: its cells (each base's own arms, grpo's compute-matched baseline,
the lr sweep on dev with the selection seeds), the design it registers (equal to the cells'
configs), the rule that picks each base's lr, and one run of the whole preset at toy size."""

import json
from dataclasses import replace

import pandas as pd
import pytest

from daca_bench.cli import main
from daca_bench.config import ConfigError, to_dict
from daca_bench.experiments.analysis.design import declared, disagreements, validate
from daca_bench.experiments.grid import reproduce
from daca_bench.experiments.grid.bases_grid import (
    BASE_VARIANTS,
    COMPUTE_MATCHED,
    DACA_ROW,
    compute_matched_steps,
    measured_cost_ratio,
    pick_bases,
    sweep_accuracy,
)
from daca_bench.experiments.grid.bases_grid import (
    TINY_BASES_DESIGN as D,
)
from daca_bench.experiments.grid.pipeline import check_disjoint, selection_cells, tiny_cells
from daca_bench.experiments.grid.preregister import design_of
from daca_bench.experiments.grid.presets import DENSE, PRESETS, Family, comparisons

from repo_paths import ROOT

BASES = PRESETS["tiny-bases"]
NOWHERE = {"sudoku": {"folder": "sft/sudoku"}}


def _configs(cells, commit="v1-2-gabc"):
    return [{**to_dict(c.config), "git": commit} for c in cells]


def test_the_confirmatory_cells_are_each_base_s_own_arms_and_the_compute_matched_baseline():
    cells = tiny_cells(BASES, NOWHERE)
    arms = {(c.axes["loss.base"], c.axes["variant"]) for c in cells}
    want = {(b, v) for b, vs in BASE_VARIANTS.items() for v in vs} | {("grpo", COMPUTE_MATCHED)}
    assert arms == want and ("spg", "+SML") not in arms and ("map", "+DACA") not in arms  # not a full cross
    seeds = set(D["confirmatory_seeds"])
    assert len(cells) == len(want) * 8 and {c.config.train.seed for c in cells} == seeds == set(range(16, 24))
    assert all(c.config.loss.base == c.axes["loss.base"] and c.config.train.eval_split == "test" for c in cells)
    assert {c.config.train.test_seed for c in cells} == {0} and {c.config.train.n_eval for c in cells} == {256}
    # the compute-matched baseline: grpo, no DPS, K = 1, the measured ratio times the steps, both recorded
    ratio = measured_cost_ratio(ROOT / "results" / "tiny-ablation" / "cells")
    matched = [c for c in cells if c.axes["variant"] == COMPUTE_MATCHED]
    assert len(matched) == 8 and {c.config.train.steps for c in matched} == {compute_matched_steps(32, ratio)} == {94}
    assert all(c.axes["compute_ratio"] == round(ratio, 4) and c.axes["base_steps"] == 32 for c in matched)
    assert all(not c.config.dps.enabled and c.config.sml.k == 1 for c in matched)
    assert {c.config.train.steps for c in cells if c not in matched} == {32}
    # each base keeps its own keys; +DACA's reading is the committed one
    spg = next(c for c in cells if c.axes["loss.base"] == "spg")
    assert spg.config.loss.beta == 0 and spg.config.loss.spg_mode == "mix"
    daca = next(c for c in cells if c.axes["variant"] == "+DACA")
    assert daca.config.sml.partition == "causal" and daca.config.sml.k == 4 and daca.config.dps.score == "progress"
    # with --steps the compute-matched cell scales with the steps it is matched to
    short = [c for c in tiny_cells(BASES, NOWHERE, steps=2) if c.axes["variant"] == COMPUTE_MATCHED]
    assert {c.config.train.steps for c in short} == {compute_matched_steps(2, ratio)} == {6}


def test_the_sweep_runs_each_base_s_two_swept_rows_on_dev_and_seeds_the_confirmation_never_uses():
    sweep = selection_cells(BASES, NOWHERE)
    rows = {(c.axes["loss.base"], c.axes["variant_of"]) for c in sweep}
    assert rows == {(b, r) for b in BASE_VARIANTS for r in ("baseline", DACA_ROW[b])}
    assert {c.config.train.eval_split for c in sweep} == {"dev"} and {c.config.train.seed for c in sweep} == {102, 103}
    assert {c.config.train.lr for c in sweep} == set(D["lr_grid"]) and max(D["lr_grid"]) > 1e-4
    assert len(sweep) == 108  # 54 arms (SPG's two rows at two mixture coefficients) x 2 seeds (BENCHMARKS.md)
    assert {c.config.loss.spg_mix for c in sweep if c.axes["loss.base"] == "spg"} == {0.5, 0.25}
    daca = [c for c in sweep if c.axes["variant_of"] == "+DACA"]
    assert {(c.config.sml.partition, c.config.sml.k, c.config.dps.score) for c in daca} == {("causal", 4, "progress")}
    names = {c.name for c in sweep}
    assert len(names) == len(sweep) and not names & {c.name for c in tiny_cells(BASES, NOWHERE)}
    # disjoint from the confirmatory cells: asserted before anything runs
    check_disjoint(BASES)
    with pytest.raises(ConfigError, match="share seed"):
        check_disjoint(BASES, seeds=[16, 102])
    with pytest.raises(ConfigError, match="share the dev split"):
        check_disjoint(replace(BASES, rl={**BASES.rl, "train.eval_split": "dev"}))


def test_the_design_written_is_what_the_cells_run():
    cells = tiny_cells(BASES, NOWHERE)
    design = validate(design_of("tiny-bases", BASES, cells, "v1-2-gabc"))
    assert disagreements(design, _configs(cells)) == []
    fam = design["families"]["sudoku"]
    assert fam["seeds"] == list(range(16, 24)) and fam["steps"] == 32 and fam["test"]["split"] == "test"
    assert fam["other_steps"] == {f"grpo {COMPUTE_MATCHED}": 94}
    assert design["variants"] == {
        **{b: list(v) for b, v in BASE_VARIANTS.items()},
        "grpo": [*BASE_VARIANTS["grpo"], COMPUTE_MATCHED],
    }
    assert design["selection"]["selection_seeds"] == [102, 103] and design["selection"]["selection_split"] == "dev"
    # primary: each base's DACA row against its baseline; the rest secondary; Holm at 0.05
    assert design["alpha"] == 0.05 and design["multiplicity"] == "holm"
    assert {(c["base"], c["variant"], c["vs"]) for c in design["comparisons"]["primary"]} == {
        (p["base"], p["row"], "baseline") for p in D["primary"]
    }
    secondary = {(c["base"], c["variant"], c["vs"]) for c in design["comparisons"]["secondary"]}
    for s in D["secondary"]:  # every row the bases' design lists, in design.json's terms
        vs = "baseline" if s["against"] == f"{s['base']} baseline" else s["against"]
        assert (s["base"], s["row"], vs) in secondary
    assert {(b, "baseline", "start") for b in BASE_VARIANTS} <= secondary
    # the table reads these families
    planned = declared(design)
    assert len(planned["primary"]) == 8 and all(c["task"] == "sudoku_tiny" for c in planned["secondary"])
    # cells that do not follow the design are caught: other steps, other seeds, another commit
    off = _configs(cells)
    off[0]["train"]["steps"] = 94  # a grpo arm at the matched steps passes the step check; a wd1 one does not
    wd1 = next(i for i, c in enumerate(off) if c["loss"]["base"] == "wd1")
    off[wd1]["train"]["steps"], off[1]["train"]["seed"], off[2]["git"] = 94, 102, "v0"
    found = disagreements(design, off)
    assert any("steps 94" in p for p in found) and any("seed 102" in p for p in found) and any("v0" in p for p in found)


def test_the_bases_filter_keeps_their_arms_and_their_comparisons(capsys):
    few = replace(BASES, bases=("wd1", "spg"))
    cells = tiny_cells(few, NOWHERE)
    assert {c.axes["loss.base"] for c in cells} == {"wd1", "spg"} and COMPUTE_MATCHED not in {
        c.axes["variant"] for c in cells
    }
    planned = comparisons(few)
    assert {c["base"] for c in planned["primary"] + planned["secondary"]} == {"wd1", "spg"}
    assert not any(c["vs"].startswith("grpo") for c in planned["secondary"])  # grpo does not run: no cross rows
    assert main(["reproduce", "--preset", "tiny-bases", "--bases", "wdl", "--no-progress"]) == 2
    assert "did you mean wd1" in capsys.readouterr().err


def test_the_rule_picks_the_best_dev_mean_ties_to_the_smaller_lr_then_the_first_value(tmp_path):
    acc = {
        ("grpo", "baseline", 5e-5, ()): 0.30,
        ("grpo", "baseline", 1e-4, ()): 0.40,
        ("grpo", "baseline", 2e-4, ()): 0.40,  # a tie: the smaller lr
        ("grpo", "+DACA", 5e-5, ()): 0.20,
        ("grpo", "+DACA", 2e-4, ()): 0.50,
        ("spg", "baseline", 1e-4, ()): 0.25,
        ("spg", "baseline", 1e-4, (("loss.spg_mix", 0.25),)): 0.25,
        ("spg", "+DPS", 1e-4, ()): 0.10,
        ("spg", "+DPS", 1e-4, (("loss.spg_mix", 0.25),)): 0.35,
    }
    picks = pick_bases(acc)
    assert picks == {
        "grpo": {"baseline": {"train.lr": 1e-4}, "+DACA": {"train.lr": 2e-4}},
        "spg": {"baseline": {"train.lr": 1e-4}, "+DPS": {"train.lr": 1e-4, "loss.spg_mix": 0.25}},
    }
    # the picks reach the confirmatory cells, and the unswept rows inherit them
    cells = {
        (c.axes["loss.base"], c.axes["variant"]): c.config
        for c in tiny_cells(replace(BASES, bases=("grpo", "spg")), NOWHERE, seeds=[16], picks=picks)
    }
    assert cells["grpo", "baseline"].train.lr == cells["grpo", "+DPS"].train.lr == 1e-4
    assert cells["grpo", "+DACA"].train.lr == cells["grpo", "+SML"].train.lr == 2e-4
    assert cells["grpo", COMPUTE_MATCHED].train.lr == 1e-4 and cells["spg", "+DPS"].loss.spg_mix == 0.25
    # the mean is over every selection seed: an arm missing one is refused, never picked on fewer
    for seed, a in ((102, 0.5), (103, 0.25)):
        cell = tmp_path / f"c{seed}"
        cell.mkdir()
        (cell / "axes.json").write_text(
            json.dumps({"loss.base": "grpo", "variant_of": "baseline", "train.lr": 1e-4, "train.seed": seed})
        )
        (cell / "summary.json").write_text(json.dumps({"test_accuracy": a}))
    assert sweep_accuracy(tmp_path, seeds=[102, 103]) == {("grpo", "baseline", 1e-4, ()): 0.375}
    with pytest.raises(ValueError, match="lacks seed"):
        sweep_accuracy(tmp_path, seeds=[102, 103, 104])


TOY = replace(
    BASES,
    families={"sudoku": Family("sudoku_tiny", 18, sft_steps=10, sft_eval_every=10, rl=DENSE)},
    sft_target=0.99,
    sft_dev=8,
    rl={**BASES.rl, "train.n_eval": 8, "train.prompts_per_step": 2, "train.num_generations": 4},
    selection={**BASES.selection, "selection_seeds": [102], "lr_grid": [1e-4]},
)


def test_the_whole_preset_runs_at_toy_size_and_resumes(tmp_path, monkeypatch, capsys):
    """sweep -> picks.json -> confirmatory cells -> a confirmatory table with the planned families."""
    monkeypatch.setitem(PRESETS, "tiny-bases-toy", TOY)
    monkeypatch.setattr(reproduce, "describe", lambda: "v1-2-gabc")
    out = tmp_path / "out"
    args = [
        "reproduce",
        "--preset",
        "tiny-bases-toy",
        "--bases",
        "grpo",
        "wd1",
        "--steps",
        "1",
        "--seeds",
        "16",
        "--workers",
        "1",
        "--work-dir",
        str(tmp_path / "work"),
        "--output-dir",
        str(out),
        "--no-progress",
    ]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "picked by the design's rule" in printed and "**Confirmatory**" in (out / "table.md").read_text()
    picks = json.loads((out / "picks.json").read_text())
    assert set(picks["picks"]) == {"grpo", "wd1"} and set(picks["picks"]["grpo"]) == {"baseline", "+DACA"}
    sweep = sorted(p.name for p in (out / "selection" / "cells").iterdir())
    assert len(sweep) == 4 and all("seed=102" in n for n in sweep)  # 2 bases x 2 rows x 1 lr x 1 seed
    cells = sorted(p.name for p in (out / "cells").iterdir() if p.name != "start")
    assert len(cells) == 9 and all("seed=16" in n for n in cells)  # 4 + 4 variants + the compute-matched cell
    matched = json.loads(
        (
            out / "cells" / "base=grpo_task=sudoku_tiny_variant=baseline_+DACA-compute_seed=16" / "config.json"
        ).read_text()
    )
    assert matched["train"]["steps"] == 3  # round(1 x 2.945)
    # the design predates the sweep's and the confirmation's first cells, and they ran under it
    design = json.loads((out / "design.json").read_text())
    first = min(p.stat().st_mtime for p in (tmp_path / "work").glob("tiny-bases-toy*/*/axes.json"))
    assert (out / "design.json").stat().st_mtime <= first
    assert (out / "picks.json").stat().st_mtime <= min(
        p.stat().st_mtime for p in (tmp_path / "work" / "tiny-bases-toy").glob("base=*/axes.json")
    )
    configs = [json.loads(p.read_text()) for p in (out / "cells").glob("*/config.json")]
    assert disagreements(design, configs) == []
    # the table: each base's DACA row primary, every other row secondary, none exploratory
    table = pd.read_csv(out / "table.csv")
    compared = table[table["vs"].notna()]
    assert set(
        zip(compared.loc[compared["plan"] == "primary", "base"], compared.loc[compared["plan"] == "primary", "variant"])
    ) == {("grpo", "+DACA"), ("wd1", "+DACA")}
    assert set(compared["plan"]) == {"primary", "secondary"} and len(compared) == 9 + 3
    # the cross-base rows the design registered, paired on the shared seed and test prompts
    cross = set(zip(compared["base"], compared["variant"], compared["vs"])) - {
        (b, v, r) for b, v, r in zip(compared["base"], compared["variant"], compared["vs"]) if " " not in r
    }
    assert cross == {
        ("wd1", "baseline", "grpo baseline"),
        ("wd1", "baseline", "grpo +DACA"),
        ("grpo", COMPUTE_MATCHED, "grpo +DACA"),
    }
    registered = {(c["base"], c["variant"], c["vs"]) for c in design["comparisons"]["secondary"] if " " in c["vs"]}
    assert cross == registered and (compared.loc[compared["vs"].str.contains(" "), "prompts"] == 8).all()
    assert "### across bases and arms" in (out / "table.md").read_text()
    assert "p_adj" in table and "MDE" in table
    # a rerun trains nothing: SFT cached, every sweep and confirmatory cell skipped
    before = {p: p.stat().st_mtime_ns for p in (tmp_path / "work").rglob("summary.json")}
    assert main(args) == 0
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "work").rglob("summary.json")} == before
