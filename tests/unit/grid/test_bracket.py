"""Learning-rate grids that bracket (issue 48): a dev pick on an edge of its lr grid is extended one
geometric step beyond that edge, picked again by the same rule, and picks.json records it."""

import json

from daca_bench.experiments.grid.bases_grid import (
    TINY_BASES_DESIGN,
    edge_extensions,
    pick_bases,
    selection_arms,
    write_picks,
)

DESIGN = {**TINY_BASES_DESIGN, "bracket": True}  # lr_grid 5e-5, 1e-4, 2e-4


def test_edge_picks_are_extended_one_step_and_inner_picks_are_not():
    picks = {
        "grpo": {"baseline": {"train.lr": 5e-5}, "+DACA": {"train.lr": 1e-4}},
        "gspo": {"baseline": {"train.lr": 2e-4}},
    }
    assert edge_extensions(picks, DESIGN) == {("grpo", "baseline"): 2.5e-5, ("gspo", "baseline"): 4e-4}
    assert edge_extensions(picks, TINY_BASES_DESIGN) == {}  # the committed design never asked for it


def test_only_the_extended_rows_run_at_the_one_new_lr():
    arms = selection_arms(DESIGN, {}, ("grpo", "gspo"), {("grpo", "baseline"): 2.5e-5})
    assert [(a[0], a[2], a[3]["train.lr"]) for a in arms] == [("grpo", "baseline", 2.5e-5)]
    assert len(selection_arms(DESIGN, {}, ("grpo",))) == 2 * len(DESIGN["lr_grid"])


def test_the_pick_is_made_again_over_the_extended_grid_and_recorded(tmp_path):
    cells = tmp_path / "cells"
    for i, (lr, acc) in enumerate([(5e-5, 0.30), (1e-4, 0.20), (2e-4, 0.10), (2.5e-5, 0.35)]):
        for seed in (102, 103):
            folder = cells / f"c{i}-{seed}"
            folder.mkdir(parents=True)
            (folder / "axes.json").write_text(
                json.dumps({"loss.base": "grpo", "variant_of": "baseline", "train.lr": lr, "train.seed": seed})
            )
            (folder / "summary.json").write_text(json.dumps({"test_accuracy": acc}))
    first = pick_bases({("grpo", "baseline", lr, ()): a for lr, a in [(5e-5, 0.3), (1e-4, 0.2), (2e-4, 0.1)]}, DESIGN)
    assert first == {"grpo": {"baseline": {"train.lr": 5e-5}}}
    beyond = edge_extensions(first, DESIGN)
    result = write_picks(cells, tmp_path, DESIGN, [102, 103], beyond)
    assert result["picks"]["grpo"]["baseline"]["train.lr"] == 2.5e-5  # better past the edge: picked there
    assert json.loads((tmp_path / "picks.json").read_text())["extended"] == {"grpo baseline": 2.5e-5}
