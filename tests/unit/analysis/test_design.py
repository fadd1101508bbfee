"""design.json: the schema check, the writer's refusal of another design, and the disagreements the table
reports when cells ran under another design or from another commit (experiments/analysis/design.py)."""

import copy
import json

import pytest

from daca_bench.errors import ConfigError
from daca_bench.experiments.analysis.design import (
    EXPLORATORY,
    PRIMARY,
    SECONDARY,
    declared,
    disagreements,
    family_of,
    read_design,
    validate,
    write_design,
)

from repo_paths import ROOT

DESIGN = {
    "schema": 1,
    "preset": "tiny-x",
    "commit": "abc1234",
    "alpha": 0.05,
    "multiplicity": "holm",
    "bar": "a primary comparison counts when its Holm-adjusted p < 0.05",
    "families": {
        "sudoku": {
            "task": "sudoku_tiny",
            "seeds": [0, 1],
            "steps": 32,
            "test": {"split": "test", "size": 512, "seed": 0, "draw": "first 512 generated"},
        }
    },
    "comparisons": {
        "primary": [{"family": "sudoku", "variant": "+DACA", "vs": "baseline"}],
        "secondary": [{"family": "sudoku", "variant": "+SML", "vs": "baseline"}],
    },
}


def _cfg(seed=0, steps=32, n_eval=512, git="abc1234", task="sudoku_tiny"):
    return {
        "train": {"task": task, "seed": seed, "steps": steps, "n_eval": n_eval, "eval_split": "test", "test_seed": 0},
        "git": git,
    }


def test_a_valid_design_passes_and_each_broken_field_is_named_in_one_line():
    assert validate(copy.deepcopy(DESIGN)) == DESIGN
    for path, value, word in [
        (("alpha",), 2.0, "alpha"),
        (("multiplicity",), "fdr", "multiplicity"),
        (("families", "sudoku", "seeds"), [], "seeds"),
        (("commit",), 5, "commit"),
        (("comparisons", "primary", 0, "family"), "math", "math"),
        (("families", "sudoku", "test", "size"), "512", "size"),
    ]:
        d = copy.deepcopy(DESIGN)
        target = d
        for k in path[:-1]:
            target = target[k]
        target[path[-1]] = value
        with pytest.raises(ConfigError, match=word) as e:
            validate(d)
        assert "\n" not in str(e.value)
    d = copy.deepcopy(DESIGN)
    del d["bar"]
    with pytest.raises(ConfigError, match="missing bar"):
        validate(d)


def test_the_writer_keeps_the_same_design_and_refuses_another(tmp_path):
    path = write_design(tmp_path, DESIGN)
    assert read_design(tmp_path) == DESIGN and json.loads(path.read_text()) == DESIGN
    assert write_design(tmp_path, {**DESIGN, "date": "later"}) == path  # the same design: kept
    with pytest.raises(ConfigError, match="another design.*seeds|another design.*families"):
        write_design(tmp_path, {**DESIGN, "families": {"sudoku": {**DESIGN["families"]["sudoku"], "seeds": [0]}}})
    assert read_design(tmp_path / "nowhere") is None
    (tmp_path / "design.json").write_text("{")
    with pytest.raises(ConfigError, match="not valid JSON"):
        read_design(tmp_path)


def test_cells_under_the_design_agree_and_each_departure_is_reported():
    assert disagreements(DESIGN, [_cfg(0), _cfg(1)]) == []
    assert disagreements(DESIGN, [_cfg(2)]) == ["sudoku: seed 2 is not among the design's seeds"]
    assert disagreements(DESIGN, [_cfg(steps=64)]) == ["sudoku: steps 64 where the design says 32"]
    assert disagreements(DESIGN, [_cfg(n_eval=256)]) == ["sudoku: test size 256 where the design says 512"]
    assert any("ran from abc1234-dirty" in x for x in disagreements(DESIGN, [_cfg(git="abc1234-dirty")]))
    assert any("unrecorded" in x for x in disagreements(DESIGN, [{**_cfg(), "git": None}]))
    assert disagreements(DESIGN, [_cfg(task="json_tiny")]) == ["task json_tiny is not in the design"]
    assert disagreements({**DESIGN, "commit": "abc1234-dirty"}, [_cfg(git="abc1234-dirty")]) == [
        "the design was written from a dirty tree (abc1234-dirty)"
    ]


def test_families_follow_the_design_else_the_preset_else_the_default():
    row = lambda v, vs, task="sudoku_tiny": {  # noqa: E731
        "base": "grpo",
        "family": "constraint",
        "task": task,
        "variant": v,
        "vs": vs,
    }
    planned = declared(DESIGN)
    assert family_of(row("+DACA", "baseline"), planned) == PRIMARY
    assert family_of(row("+SML", "baseline"), planned) == SECONDARY
    assert family_of(row("baseline", "start"), planned) == EXPLORATORY  # not declared by this design
    assert family_of(row("+DACA", "baseline", "json_tiny"), planned) == EXPLORATORY
    default = declared(None)
    assert [
        family_of(row(v, vs), default)
        for v, vs in [
            ("+DACA", "baseline"),
            ("baseline", "start"),
            ("+DPS", "baseline"),
            ("+SML", "baseline"),
            ("+DPS-random", "baseline"),
        ]
    ] == [PRIMARY, PRIMARY, SECONDARY, SECONDARY, EXPLORATORY]
    preset = declared(None, {"comparisons": {"primary": [{"family": "sudoku", "variant": "+SML", "vs": "baseline"}]}})
    assert family_of(row("+SML", "baseline"), preset, {"sudoku_tiny": "sudoku"}) == PRIMARY
    assert family_of(row("+DACA", "baseline"), preset, {"sudoku_tiny": "sudoku"}) == EXPLORATORY


def _grid(folder, git="abc1234", steps=32):
    """A preset-shaped folder: cells/ with baseline and +DACA cells of sudoku_tiny seeds 0-1 (random 0/1
    rewards on the first 64 test puzzles), each config recording its git."""
    import numpy as np

    from daca_bench.registry import get_task

    ids = [s.id for s in get_task("sudoku_tiny", split="test", n=64, seed=0).samples]
    rng = np.random.default_rng(0)
    for variant, (dps, k) in {"baseline": (False, 1), "+DACA": (True, 4)}.items():
        for seed in (0, 1):
            cell = folder / "cells" / f"variant={variant}_seed={seed}"
            cell.mkdir(parents=True)
            cfg = _cfg(seed, steps=steps, n_eval=64, git=git)
            cfg.update(loss={"base": "grpo"}, dps={"enabled": dps}, sml={"k": k})
            (cell / "config.json").write_text(json.dumps(cfg))
            (cell / "axes.json").write_text(json.dumps({"variant": variant}))
            rewards = rng.integers(0, 2, len(ids))
            (cell / "summary.json").write_text(json.dumps({"test_accuracy": float(rewards.mean())}))
            (cell / "eval.jsonl").write_text(
                "".join(json.dumps({"id": i, "reward": float(r)}) + "\n" for i, r in zip(ids, rewards))
            )
    return folder


def test_the_table_says_confirmatory_only_when_every_cell_ran_under_the_design(tmp_path):
    from daca_bench.experiments.analysis.render import to_markdown
    from daca_bench.experiments.analysis.results import load_table

    design = {
        **DESIGN,
        "families": {
            "sudoku": {**DESIGN["families"]["sudoku"], "test": {**DESIGN["families"]["sudoku"]["test"], "size": 64}}
        },
    }
    folder = _grid(tmp_path / "run")
    assert to_markdown(load_table(folder)).startswith("**Exploratory**: no design.json")
    write_design(folder, design)
    table = load_table(folder)
    assert to_markdown(table).startswith("**Confirmatory**: every cell ran under run/design.json (commit abc1234")
    assert table.set_index("variant").loc["+DACA", "plan"] == PRIMARY
    other = _grid(tmp_path / "other", git="fff0000-dirty")
    write_design(other, design)
    md = to_markdown(load_table(other))
    assert md.startswith("**Not confirmatory**") and "a cell ran from fff0000-dirty, the design from abc1234" in md
    later = _grid(tmp_path / "later", steps=64)
    write_design(later, design)
    assert "steps 64 where the design says 32" in to_markdown(load_table(later))


def test_the_default_rerun_says_exploratory_with_its_reason_never_confirmatory():
    """Issue 58: `bash scripts/main.sh` runs preset tiny, whose design was chosen after looking at these
    seeds: its design.json says so, and the table's first line prints the reason, never "Confirmatory";
    the committed results/tiny (its design kept aside as design.registered.json) states the same."""

    from daca_bench.experiments.analysis.design import design_line
    from daca_bench.experiments.grid.pipeline import tiny_cells
    from daca_bench.experiments.grid.preregister import design_of
    from daca_bench.experiments.grid.presets import PRESETS

    cells = tiny_cells(PRESETS["tiny"], {"sudoku": {"folder": "a"}})
    design = validate(design_of("tiny", PRESETS["tiny"], cells, commit="abc1234"))
    assert design["exploratory"] == "reproduces results/tiny; chosen after looking at these seeds"
    configs = [
        {
            "train": {
                "task": c.config.train.task,
                "seed": c.config.train.seed,
                "steps": c.config.train.steps,
                "n_eval": c.config.train.n_eval,
                "test_seed": c.config.train.test_seed,
            },
            "git": "abc1234",
            "loss": {"base": "grpo"},
        }
        for c in cells
    ]
    line = design_line(design, configs, "tiny-2026")
    assert line.startswith("**Exploratory** (reproduces results/tiny; chosen after looking at these seeds)")
    assert "Confirmatory" not in line and design_line(
        {k: v for k, v in design.items() if k != "exploratory"}, configs, "x"
    ).startswith("**Confirmatory**")
    committed = ROOT / "results" / "tiny" / "table.md"
    if committed.is_file():
        first = committed.read_text().splitlines()[0]
        assert first.startswith("**Exploratory** (chosen after looking at these seeds): a design was registered")
