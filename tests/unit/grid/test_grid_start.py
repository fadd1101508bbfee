"""A grid whose cells start from `train.init` scores that init once on the cells' own test set
(issue 45 item 4): `daca-bench ablate` writes OUT/start/<task>/eval.jsonl as reproduce does for
its SFT starts, so `daca-bench table OUT` has the start row and the baseline's gain over it; and
`reproduce --tasks-dir DIR --families sort4` runs a task of one's own as a family of its own."""

import json

from daca_bench.cli import main
from daca_bench.config import ModelConfig, RLConfig, apply
from daca_bench.experiments.analysis.results import load_table
from daca_bench.experiments.grid.ablation import Cell, start_cells
from daca_bench.models import load_model

QUICK = {
    "train.steps": 1,
    "train.prompts_per_step": 2,
    "train.num_generations": 2,
    "train.n_eval": 4,
    "train.threads": 1,
    "rollout.gen_length": 8,
    "rollout.block_length": 4,
    "rollout.steps": 4,
    "eval.gen_length": 8,
    "eval.block_length": 4,
    "eval.steps": 4,
}


def test_ablate_scores_the_init_on_the_cells_test_set_and_the_table_has_its_row(tmp_path, capsys):
    init = tmp_path / "init"
    load_model(ModelConfig(seed=3)).save(init)
    grid = tmp_path / "grid.yaml"
    grid.write_text(
        json.dumps(
            {
                "overrides": {**QUICK, "train.task": "arithmetic_tiny", "train.init": str(init)},
                "axes": {"variant": ["baseline"]},
            }
        )
    )
    out = tmp_path / "out"
    assert main(["ablate", str(grid), "--dry-run"]) == 0
    assert capsys.readouterr().out.split() == ["variant=baseline", "start/arithmetic_tiny"]
    assert main(["ablate", str(grid), "--output-dir", str(out), "--workers", "1", "--no-progress"]) == 0
    assert f"the start ({init}) scored on arithmetic_tiny's test set" in capsys.readouterr().out
    start = [json.loads(line) for line in (out / "start" / "arithmetic_tiny" / "eval.jsonl").read_text().splitlines()]
    cell = [json.loads(line) for line in (out / "variant=baseline" / "eval.jsonl").read_text().splitlines()]
    assert [r["id"] for r in start] == [r["id"] for r in cell] and len(start) == 4  # the same test set
    summary = json.loads((out / "start" / "arithmetic_tiny" / "summary.json").read_text())
    assert summary["task_record"]["family"] == "math"
    table = load_table(out).set_index("variant")
    assert table.loc["start", "prompts"] == 4 and table.loc["baseline", "vs"] == "start"


def test_cells_of_one_task_from_different_inits_get_no_start_row():
    cfg = apply(RLConfig(), {**{k: v for k, v in QUICK.items()}, "train.task": "arithmetic_tiny", "train.init": "a"})
    same = [Cell("x", {}, cfg), Cell("y", {}, apply(cfg, {"train.seed": 1}))]
    assert [c.name for c in start_cells(same)[0]] == ["x"] and start_cells(same)[1] == []
    other = [Cell("x", {}, cfg), Cell("y", {}, apply(cfg, {"train.init": "b"}))]
    keep, notes = start_cells(other)
    assert keep == [] and notes and "no start row for arithmetic_tiny" in notes[0]
    assert start_cells([Cell("z", {}, apply(cfg, {"train.init": ""}))]) == ([], [])


def test_reproduce_families_takes_a_registered_tiny_task_of_one_s_own(tmp_path, fresh, capsys):
    """`reproduce --tasks-dir DIR --families sort4`: the task becomes a family of its own, its canvas
    the longest gold answer plus EOS; a name that is neither a family nor a task names --tasks-dir."""
    from dataclasses import replace

    from daca_bench.canvas import check_rl
    from daca_bench.cli import Parser
    from daca_bench.experiments.commands.scaffold import write
    from daca_bench.experiments.grid.pipeline import tiny_cells
    from daca_bench.experiments.grid.reproduce import _preset, configure

    write("sort4", tmp_path / "my_tasks", tmp_path / "my_tests")
    argv = ["reproduce", "--preset", "tiny-quick", "--tasks-dir", str(tmp_path / "my_tasks"), "--families", "sort4"]
    assert main(argv + ["--needs-docker"]) == 0 and capsys.readouterr().out.strip() == "no"
    parser = Parser()
    configure(parser)
    preset = _preset(parser.parse_args(["--preset", "tiny-quick", "--families", "sort4", "sudoku"]))
    assert list(preset.families) == ["sort4", "sudoku"] and preset.families["sort4"].task == "sort4"
    assert preset.families["sort4"].gen_length == 6  # "0123" and EOS, even
    cells = tiny_cells(preset, {f: {"folder": ""} for f in preset.families})
    mine = [c for c in cells if c.config.train.task == "sort4"]
    assert mine and {c.config.rollout.gen_length for c in mine} == {6}
    check_rl(replace(mine[0].config, train=replace(mine[0].config.train, init="")))  # the tiny model's canvas holds it
    assert main(["reproduce", "--preset", "tiny-quick", "--families", "sort5", "--needs-docker"]) == 2
    err = capsys.readouterr().err
    assert "neither a family of tiny-quick (sudoku) nor a registered task" in err and "--tasks-dir DIR" in err
