"""One meaning per variant name (issue 45 item 3): a grid names a preset's cells (`headline:baseline`,
`headline:+DACA`) instead of spelling their keys, and gets exactly the configs `train --variant` gives,
the grid's own keys winning as the command line's do; a name with two meanings in one grid is refused."""

import argparse
import json

import pytest

from daca_bench.config import ConfigError
from daca_bench.experiments.commands.train import run_config
from daca_bench.experiments.grid.ablation import VARIANTS, expand
from daca_bench.experiments.grid.headline import named_keys, split_variant

OVERRIDES = {"train.init": "runs/x/final", "train.steps": 2}


def _train(variant: str, *keys: str):
    """What `daca-bench train --config configs/tiny.yaml --variant VARIANT KEYS...` runs."""
    return run_config(argparse.Namespace(config="configs/tiny.yaml", variant=variant, overrides=list(keys)))


@pytest.mark.parametrize("task", ["sudoku_tiny", "arithmetic"])  # a headline family's task, and any other
def test_a_grid_cell_named_headline_has_the_config_train_variant_gives(task):
    grid = {
        "base": "configs/tiny.yaml",
        "overrides": OVERRIDES,
        "axes": {"variant": ["headline:baseline", "headline:+DACA"], "train.task": [task], "train.seed": [0, 3]},
    }
    cells = expand(grid)
    assert len(cells) == 4
    for c in cells:
        name, seed = c.axes["variant"], c.axes["train.seed"]
        assert c.axes["cells_of"] == "headline" and name in ("baseline", "+DACA")  # the table's row: the plain name
        keys = [f"{k}={v}" for k, v in OVERRIDES.items()] + [f"train.task={task}", f"train.seed={seed}"]
        assert c.config == _train(name, *keys)
    daca = next(c for c in cells if c.axes["variant"] == "+DACA").config
    # the headline's regime, read from the preset (not restated): the grid's steps win, as on a command line
    assert (daca.train.mu, daca.loss.beta, daca.loss.epsilon, daca.train.lr, daca.sml.p_mask_prompt) == (
        2,
        0.04,
        0.2,
        1e-4,
        0.15,
    )
    assert (daca.sml.k, daca.sml.partition, daca.dps.enabled, daca.dps.score, daca.train.steps) == (
        4,
        "causal",
        True,
        "progress",
        2,
    )
    assert [c.name for c in cells][0] == f"variant=headline_baseline_task={task}_seed=0"


def test_a_plain_variant_keeps_its_bundle_and_a_name_has_one_meaning_per_grid():
    plain = expand({"base": "configs/tiny.yaml", "axes": {"variant": ["+DACA"]}})[0]
    assert plain.axes == {"variant": "+DACA"} and (plain.config.sml.partition, plain.config.train.mu) == ("random", 1)
    assert named_keys("+DACA", "sudoku_tiny") == VARIANTS["+DACA"]
    assert split_variant("tiny-full:+DACA") == ("tiny-full", "+DACA")
    with pytest.raises(ConfigError, match="both be '\\+DACA' in the table"):
        expand({"axes": {"variant": ["+DACA", "headline:+DACA"]}})
    with pytest.raises(ConfigError, match="'\\+FOO' is not a variant of the tiny-ablation preset"):
        expand({"axes": {"variant": ["headline:+FOO"]}})
    with pytest.raises(ConfigError, match="SOURCE:NAME"):
        expand({"axes": {"variant": ["paper:+DACA"]}})


def test_ablate_dry_run_lists_the_named_cells(tmp_path, capsys):
    from daca_bench.cli import main

    grid = tmp_path / "grid.yaml"
    grid.write_text('base: configs/tiny.yaml\naxes:\n  variant: [headline:baseline, "headline:+DACA"]\n')
    assert main(["ablate", str(grid), "--dry-run", "--no-start"]) == 0
    assert capsys.readouterr().out.split() == ["variant=headline_baseline", "variant=headline_+DACA"]
    assert json.loads(json.dumps(expand({"axes": {"variant": ["headline:+DACA"]}})[0].axes)) == {
        "variant": "+DACA",
        "cells_of": "headline",
    }


def test_ablate_takes_overrides_over_the_grid_s_as_train_does(tmp_path, capsys):
    """`daca-bench ablate GRID KEY=VALUE...`: the keys join the grid's overrides (a smoke run's train.steps=2),
    so beneath them a named cell's keys still lose to the command line's, as with train --variant."""
    from daca_bench.cli import main

    grid = tmp_path / "grid.yaml"
    grid.write_text("base: configs/tiny.yaml\noverrides: {train.steps: 5}\naxes: {variant: [headline:+DACA]}\n")
    assert main(["ablate", str(grid), "--dry-run", "--no-start", "train.steps=2", "learning_rate=3e-4"]) == 0
    assert capsys.readouterr().out.split() == ["variant=headline_+DACA"]
    assert main(["ablate", str(grid), "--dry-run", "train.nope=1"]) == 2
    assert "train.nope" in capsys.readouterr().err
    cfg = expand(
        {
            "base": "configs/tiny.yaml",
            "overrides": {"train.steps": 2, "train.lr": 3e-4},
            "axes": {"variant": ["headline:+DACA"]},
        }
    )[0].config
    assert cfg == _train("+DACA", "train.steps=2", "learning_rate=3e-4")
