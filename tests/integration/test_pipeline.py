"""reproduce's pipeline: presets as data with the committed picks, one eval-set builder for the
start and the cells, provenance of the code and the weights, the guards around a run's folders."""

import json
import subprocess
import tomllib
from dataclasses import replace
from pathlib import Path

from daca_bench.cli import main
from daca_bench.experiments.grid import ablation, pipeline, reproduce
from daca_bench.experiments.grid.presets import FIVE, PICKS, PRESETS, Family, TinyPreset, comparisons
from daca_bench.resources import data_dir

from repo_paths import ROOT

MINI = TinyPreset(
    "test: 1 family, 2 variants, 1 seed",
    {"math": Family("arithmetic", 4, sft_steps=20)},
    rl_steps=2,
    seeds=(0,),
    variants=("baseline", "+DACA"),
    sft_target=0.99,
    sft_eval_every=10,
    rl={"train.n_eval": 8, "train.prompts_per_step": 2, "train.num_generations": 4},
)


# ---- presets as data ------------------------------------------------------------------------
def test_the_picks_are_read_from_the_committed_file_and_shipped_with_the_wheel():
    committed = ROOT / "results" / "tiny-readings" / "picks.json"
    assert (data_dir("readings") / "picks.json").read_bytes() == committed.read_bytes()
    assert PICKS == json.loads(committed.read_text())["picks"] == PRESETS["tiny"].picks == PRESETS["tiny-full"].picks
    # no module repeats the file: the picked +DACA reading is written nowhere in the package
    literal = PICKS["+DACA"]["reading"]
    assert not [p for p in (ROOT / "daca_bench").rglob("*.py") if literal in p.read_text()]
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "daca_bench._data.readings" in tool["packages"]
    assert tool["package-dir"]["daca_bench._data.readings"] == "results/tiny-readings"
    assert tool["package-data"]["daca_bench._data.readings"] == ["picks.json"]


def test_the_planned_comparisons_of_a_preset():
    planned = comparisons(PRESETS["tiny-full"])
    assert {(c["family"], c["variant"], c["vs"]) for c in planned["primary"]} == {
        (f, v, vs)
        for f in ("code", "json", "math", "sudoku")
        for v, vs in (("+DACA", "baseline"), ("baseline", "start"))
    }
    assert {c["variant"] for c in comparisons(PRESETS["tiny-ablation"])["secondary"]} == {"+DPS", "+SML", "+DPS-random"}
    default = {k: {(c["variant"], c["vs"]) for c in rows} for k, rows in comparisons(PRESETS["tiny"]).items()}
    assert default == {"primary": {("+DACA", "baseline"), ("baseline", "start")}, "secondary": set()}


def test_needs_docker_follows_the_preset_s_families(capsys):
    for args, answer in (
        (["--preset", "tiny-quick"], "no"),
        ([], "no"),
        (["--preset", "tiny-full"], "yes"),
        (["--preset", "tiny-full", "--families", "json", "math"], "no"),
    ):
        assert main(["reproduce", *args, "--needs-docker"]) == 0
        assert capsys.readouterr().out.strip() == answer, args
    script = (ROOT / "scripts" / "main.sh").read_text()
    assert "--needs-docker" in script and '" --preset"' not in script


# ---- one eval set for the start and the cells ----------------------------------------------
def test_a_chat_template_preset_scores_its_start_and_its_cells_on_the_same_prompts(tmp_path, monkeypatch):
    from daca_bench.eval import evaluate as ev
    from daca_bench.testing import write_paper_folder
    from daca_bench.train.trainer import train

    write_paper_folder("llada", tmp_path / "sft" / "final", compact=True)  # LLaDA's chat layout, pad = eos
    chat = TinyPreset(
        "chat",
        {"sudoku": FIVE["sudoku"]},
        rl_steps=1,
        seeds=(0,),
        variants=("baseline",),
        rl={"train.n_eval": 3, "train.prompts_per_step": 2, "train.num_generations": 2, "train.chat_template": True},
    )
    cells = pipeline.tiny_cells(chat, {"sudoku": {"folder": str(tmp_path / "sft")}})
    seen = []
    real = ev.sample
    monkeypatch.setattr(
        ev, "sample", lambda adapter, prompts, *a, **k: seen.append(list(prompts)) or real(adapter, prompts, *a, **k)
    )
    ablation.evaluate_starts(cells, tmp_path / "grid")
    train(cells[0].config, tmp_path / "cell", progress=False)
    start, cell = seen[0], seen[-1]
    assert start == cell and len(start) == 3 and all(p.startswith("<|start_header_id|>user") for p in start)


# ---- guards ---------------------------------------------------------------------------------
def test_calibration_never_scores_on_the_test_split(tmp_path, capsys):
    args = [
        "reproduce",
        "--preset",
        "tiny-quick",
        "--work-dir",
        str(tmp_path),
        "--calibrate",
        "sudoku",
        "--no-progress",
    ]
    assert main(args + ["--set", "train.eval_split=test"]) == 2
    err = capsys.readouterr().err.strip()
    assert "dev split only" in err and len(err.splitlines()) == 1 and not (tmp_path / "sft").exists()


def test_reproduce_refuses_a_folder_holding_another_run_s_cells(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(PRESETS, "mini", MINI)
    other = tmp_path / "out" / "cells" / "base=grpo_task=sudoku_tiny_variant=+SML_seed=5"
    other.mkdir(parents=True)
    (other / "summary.json").write_text("{}")
    args = [
        "reproduce",
        "--preset",
        "mini",
        "--work-dir",
        str(tmp_path / "work"),
        "--output-dir",
        str(tmp_path / "out"),
        "--no-progress",
    ]
    assert main(args) == 2
    assert "holds 1 cell(s) this run would not write" in capsys.readouterr().err
    assert (other / "summary.json").exists() and not (tmp_path / "work").exists()  # refused before anything ran


def test_the_default_output_is_a_folder_of_its_own_and_git_ignored():
    out = reproduce.default_output("tiny")
    assert out.parts[0] == "runs" and out.name.startswith("tiny-") and out != Path("results/tiny")
    ignored = subprocess.run(["git", "check-ignore", "-q", str(out / "table.csv")], cwd=ROOT)
    assert ignored.returncode == 0


# ---- provenance and the registered design ----------------------------------------------------
def _stop(*_a, **_k):
    from daca_bench.errors import ConfigError

    raise ConfigError("stopped by the test")


def test_a_confirmatory_preset_registers_its_design_first_and_refuses_another(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(PRESETS, "mini", replace(MINI, confirmatory=True))
    monkeypatch.setattr(reproduce, "describe", lambda: "v1-3-gabc1234")
    out = tmp_path / "out"
    seen = []
    monkeypatch.setattr(reproduce, "run_sft", lambda *a, **k: seen.append((out / "design.json").exists()) or _stop())
    args = [
        "reproduce",
        "--preset",
        "mini",
        "--work-dir",
        str(tmp_path / "w"),
        "--output-dir",
        str(out),
        "--no-progress",
    ]
    assert main(args) == 2 and seen == [True]  # written before the first stage ran
    design = json.loads((out / "design.json").read_text())
    assert design["commit"] == "v1-3-gabc1234" and design["alpha"] == 0.05 and design["multiplicity"] == "holm"
    assert design["families"]["math"]["seeds"] == [0] and design["families"]["math"]["steps"] == 2
    assert design["families"]["math"]["test"] == {
        **design["families"]["math"]["test"],
        "split": "test",
        "size": 8,
        "seed": 0,
    }
    assert {(c["variant"], c["vs"]) for c in design["comparisons"]["primary"]} == {
        ("+DACA", "baseline"),
        ("baseline", "start"),
    }
    assert "p < 0.005" in design["bar"]
    capsys.readouterr()
    assert main(args) == 2 and "stopped by the test" in capsys.readouterr().err  # the same design: kept
    assert main(args + ["--seeds", "0", "1"]) == 2
    assert "holds another design" in capsys.readouterr().err and seen == [True, True]
    # a dirty checkout: refused for a confirmatory preset, unless --allow-dirty
    monkeypatch.setattr(reproduce, "describe", lambda: "v1-3-gabc1234-dirty")
    assert main(args[:-2] + [str(tmp_path / "out2"), "--no-progress"]) == 2
    assert "uncommitted changes" in capsys.readouterr().err and not (tmp_path / "out2").exists()
    assert main(args[:-2] + [str(tmp_path / "out2"), "--no-progress", "--allow-dirty"]) == 2
    assert json.loads((tmp_path / "out2" / "design.json").read_text())["commit"].endswith("-dirty")


def test_cells_record_the_grid_s_code_and_are_set_aside_when_their_init_weights_change(tmp_path):
    from daca_bench.config import RLConfig, apply
    from daca_bench.experiments.grid.ablation import Cell, stamp_cells
    from daca_bench.experiments.grid.executors import _run_cell
    from daca_bench.testing import write_paper_folder

    init = write_paper_folder("llada", tmp_path / "init", compact=True)
    cfg = apply(
        RLConfig(),
        {
            "model": {"name": str(init)},
            "train": {
                "task": "even_length",
                "init": str(init),
                "steps": 1,
                "n_eval": 2,
                "threads": 1,
                "prompts_per_step": 2,
                "num_generations": 2,
            },
        },
    )
    (cell,) = stamp_cells([Cell("c", {}, cfg)], "v1-gabc")
    assert _run_cell(cell, str(tmp_path / "grid"), 1, 0)["status"] == "done"
    stored = json.loads((tmp_path / "grid" / "c" / "config.json").read_text())
    assert stored["git"] == "v1-gabc" and stored["init_sha256"] == cell.provenance["init_sha256"]
    (again,) = stamp_cells([Cell("c", {}, cfg)], "v2-gdef")  # other code, same weights: a finished cell stays
    assert _run_cell(again, str(tmp_path / "grid"), 1, 0)["status"] == "skipped"
    write_paper_folder("llada", init, seed=1, compact=True)  # new weights at the same path
    (moved,) = stamp_cells([Cell("c", {}, cfg)], "v2-gdef")
    assert moved.provenance["init_sha256"] != cell.provenance["init_sha256"]
    result = _run_cell(moved, str(tmp_path / "grid"), 1, 0)
    assert result["status"] == "done" and result["replaced"].endswith(".stale/0")
    assert json.loads((tmp_path / "grid" / "c" / "config.json").read_text())["git"] == "v2-gdef"
