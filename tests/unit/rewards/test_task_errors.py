"""Registration and small errors (issue 45 item 3), each one line and no traceback: a task file name
in two task folders, a task name registered by two files, a task file with a syntax error or one
that fails to import, an unknown task (naming --tasks-dir); `ablate --no-progress`, `ablate --dry-run`
on a task this machine does not know; `reproduce --list` labels from the code and the tables;
`train --variant` prints only the preset's keys the command line leaves alone."""

import argparse
import json

from daca_bench.cli import main

TASK = """
from daca_bench.registry import register_task
from daca_bench.types import Sample, Task


@register_task("{name}", family="math", version=1, description="a test task")
def build(split="test", n=None, seed=0):
    return Task("{name}", "math", 1, [Sample("{name}/0", "1+1=", "2")], lambda s, c: None, split)
"""


def _one_line(capsys, command: str) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"daca-bench {command}: ") and "\n" not in err and "Traceback" not in err, err
    return err


def test_a_task_file_name_in_two_folders_names_both(tmp_path, fresh, capsys):
    for folder, name in (("a", "twin_a"), ("b", "twin_b")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "mine.py").write_text(TASK.format(name=name))
    assert main(["tasks", "--tasks-dir", str(tmp_path / "a"), "--tasks-dir", str(tmp_path / "b")]) == 2
    err = _one_line(capsys, "tasks")
    assert (
        "two task files named mine.py" in err
        and str(tmp_path / "a" / "mine.py") in err
        and str(tmp_path / "b" / "mine.py") in err
        and "rename one" in err
    )


def test_a_task_name_registered_by_two_files_names_both(tmp_path, fresh, capsys):
    (tmp_path / "one.py").write_text(TASK.format(name="same_name"))
    (tmp_path / "two.py").write_text(TASK.format(name="same_name"))
    assert main(["tasks", "--tasks-dir", str(tmp_path)]) == 2
    err = _one_line(capsys, "tasks")
    assert "task 'same_name' is registered twice" in err
    assert str(tmp_path / "one.py") in err and str(tmp_path / "two.py") in err


def test_a_task_file_that_does_not_parse_or_import_is_one_line_with_file_and_line(tmp_path, fresh, capsys):
    (tmp_path / "broken.py").write_text("from daca_bench.registry import register_task\n\ndef build(:\n    pass\n")
    assert main(["tasks", "--tasks-dir", str(tmp_path)]) == 2
    err = _one_line(capsys, "tasks")
    assert f"{tmp_path / 'broken.py'}:3: syntax error in a task file" in err
    (tmp_path / "broken.py").write_text("import os\n\nVALUE = undefined_name + 1\n")
    assert main(["tasks", "--tasks-dir", str(tmp_path)]) == 2
    err = _one_line(capsys, "tasks")
    assert f"{tmp_path / 'broken.py'}:3: the task file failed to import (NameError" in err


def test_an_unknown_task_names_tasks_dir(fresh, capsys):
    assert main(["tasks", "--show", "sort4"]) == 2
    err = _one_line(capsys, "tasks")
    assert "unknown task 'sort4'" in err and "--tasks-dir DIR" in err and "DACA_BENCH_TASKS" in err


def test_ablate_takes_no_progress_and_its_dry_run_checks_the_task(tmp_path, fresh, capsys):
    grid = tmp_path / "grid.yaml"
    grid.write_text(json.dumps({"overrides": {"train.task": "sort4"}, "axes": {"variant": ["baseline", "+DACA"]}}))
    assert main(["ablate", str(grid), "--dry-run", "--no-progress"]) == 2
    assert "unknown task 'sort4'" in _one_line(capsys, "ablate")
    grid.write_text(json.dumps({"overrides": {"train.task": "arithmetic_tiny"}, "axes": {"variant": ["baseline"]}}))
    assert main(["ablate", str(grid), "--dry-run", "--no-progress"]) == 0
    assert capsys.readouterr().out.split() == ["variant=baseline"]


def test_reproduce_list_labels_come_from_the_code_and_the_committed_tables(capsys):
    from daca_bench.experiments.grid.presets import PRESETS

    assert main(["reproduce", "--list"]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if line.strip()}
    for name in ("tiny", "tiny-ablation"):  # a run registers a design; the committed results/ folders hold none
        assert lines[name].split()[1:3] == ["confirmatory", "exploratory"]
    assert lines["tiny-full"].split()[1:3] == ["confirmatory", "confirmatory"]
    assert lines["tiny-quick"].split()[1] == "exploratory"
    for name in ("tiny", "tiny-confirm"):  # no description calls a preset confirmatory where its table is not
        assert "confirmatory" not in PRESETS[name].description


def test_train_variant_prints_only_the_keys_the_command_line_leaves(capsys):
    from daca_bench.experiments.commands.train import run_config

    args = argparse.Namespace(
        config="configs/tiny.yaml", variant="+DACA", overrides=["train.task=sudoku_tiny", "train.steps=1"]
    )
    assert run_config(args).train.steps == 1
    line = capsys.readouterr().err
    assert "train.steps=32" not in line and "sml.k=4" in line
    assert line.strip().endswith("; overridden on the command line: train.steps=1")
    args.overrides = ["train.task=sudoku_tiny"]
    assert run_config(args).train.steps == 32
    line = capsys.readouterr().err
    assert "train.steps=32" in line and "overridden" not in line
