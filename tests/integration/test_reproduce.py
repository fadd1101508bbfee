import json
import time
from dataclasses import replace
from pathlib import Path

import pytest

from daca_bench.cli import main
from daca_bench.config import apply
from daca_bench.experiments.grid import pipeline as reproduce
from daca_bench.experiments.grid.jobs import Job, run_jobs, steps_done
from daca_bench.experiments.grid.pipeline import sft_config, sft_folder
from daca_bench.experiments.grid.presets import FIVE, FULL_EVAL, PRESETS, Family, TinyPreset
from daca_bench.registry import draw_test, get_task, prompt_digest, read_excluded, task_spec

from repo_paths import ROOT

MINI = TinyPreset(
    "test: 2 families, 2 variants, 1 seed, 2 RL steps",
    {"math": Family("arithmetic", 4, sft_steps=20), "code": Family("python_tiny", 12, sft_steps=10)},
    rl_steps=2,
    seeds=(0,),
    variants=("baseline", "+DACA"),
    sft_target=0.99,
    sft_eval_every=10,
    rl={"train.n_eval": 8, "train.prompts_per_step": 2, "train.num_generations": 4},
)


def test_reproduce_runs_sft_grid_table_and_plots_then_reuses_everything(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(PRESETS, "mini", MINI)
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
    assert main(args) == 0
    printed = capsys.readouterr().out
    out = tmp_path / "out"
    for name in (
        "table.md",
        "table.csv",
        "table.tex",
        "gains.png",
        "gains.pdf",
        "curves.png",
        "dps.png",
        "config.json",
        "sft.md",
    ):
        assert (out / name).exists(), name
    table = (out / "table.md").read_text()
    assert (
        "| math | arithmetic |" in table
        and "| code | python_tiny |" in table
        and "| +DACA |" in table
        and "MDE" in table
    )
    assert table in printed and "SFT start points" in printed
    cells = sorted(p.name for p in (out / "cells").iterdir() if p.name != "start")
    assert len(cells) == 4 and all((out / "cells" / c / "summary.json").exists() for c in cells)
    assert all((out / "cells" / c / "eval.jsonl").exists() for c in cells)  # per-prompt results, for pairing
    # the RL start, scored once per family on the cells' test set
    assert sorted(p.name for p in (out / "cells" / "start").iterdir()) == ["arithmetic", "python_tiny"]
    assert not list((out / "cells").glob("*/final")) and not list((out / "cells").glob("*/checkpoint"))
    meta = json.loads((out / "config.json").read_text())
    assert meta["preset"] == "mini" and set(meta["sft"]) == {"math", "code"}
    # dev evaluations every 10 SFT steps, on prompts held out of the train split
    sft_dir = next((tmp_path / "work" / "sft").glob("arithmetic-*"))
    dev = [json.loads(line) for line in (sft_dir / "metrics.jsonl").read_text().splitlines() if "dev_accuracy" in line]
    assert [d["step"] for d in dev] == [10, 20]
    # a second run trains nothing: SFT is cached and every cell is skipped; a cell an earlier,
    # larger grid left in the work folder stays out of the published results
    old = tmp_path / "work" / "mini" / "base=grpo_task=arithmetic_variant=+DPS_seed=7"
    old.mkdir()
    (old / "summary.json").write_text('{"test_accuracy": 1.0}')
    before = {p: p.stat().st_mtime_ns for p in (tmp_path / "work").rglob("summary.json")}
    assert main(args) == 0
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "work").rglob("summary.json")} == before
    assert len(list((out / "cells").iterdir())) == 5  # 4 cells and start/


def test_sft_cache_key_changes_with_the_config(tmp_path):
    a = sft_folder(tmp_path, sft_config(MINI, FIVE["math"]))
    b = sft_folder(tmp_path, sft_config(MINI, Family("arithmetic", 6)))
    assert (
        a != b and a.name.startswith("arithmetic_tiny-") and a == sft_folder(tmp_path, sft_config(MINI, FIVE["math"]))
    )
    assert sft_config(MINI, FIVE["math"]).sft.target_accuracy == 0.3  # the family's own target over the preset's


def test_paper_presets_stop_at_once_without_a_gpu(capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    t0 = time.perf_counter()
    assert main(["reproduce", "--preset", "llada-gsm8k", "--no-progress"]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err and time.perf_counter() - t0 < 10
    assert {"paper", "llada-json-schema", "llada-humaneval"} <= set(PRESETS)


def test_preset_names_and_listing(capsys):
    assert main(["reproduce", "--preset", "tiny-quik"]) == 2
    assert "did you mean tiny-quick" in capsys.readouterr().err
    assert main(["reproduce", "--list"]) == 0
    listing = capsys.readouterr().out
    assert all(name in listing for name in PRESETS)


def test_the_default_grid_is_the_issue_s(tmp_path):
    tiny = PRESETS["tiny"]
    sft = {label: {"folder": str(tmp_path / label)} for label in tiny.families}
    cells = reproduce.tiny_cells(tiny, sft)
    assert len(cells) == len(tiny.families) * 2 * len(tiny.seeds) and len(tiny.seeds) >= 4
    assert {c.config.loss.base for c in cells} == {"grpo"}
    assert {c.axes["variant"] for c in cells} == {"baseline", "+DACA"}
    # the default re-runs tiny-ablation's cells of those arms and seeds, key for key but for the test set's size,
    # whose first 256 puzzles are tiny-ablation's (the draw is prefix-stable): results/tiny-ablation
    ablation_cells = reproduce.tiny_cells(PRESETS["tiny-ablation"], sft)
    ablation = {c.name: c.config for c in ablation_cells}
    n = {c.config.train.n_eval for c in cells}
    assert n == {1024} and all(ablation[c.name] == apply(c.config, {"train.n_eval": 256}) for c in cells)
    big, small = (draw_test("sudoku_tiny", "test", k, 0) for k in (1024, 256))
    assert [s.prompt for s in list(big.samples)[:256]] == [s.prompt for s in small.samples]
    assert len({s.prompt for s in big.samples}) == 1024
    assert {c.axes["variant"] for c in ablation_cells} == {"baseline", "+DPS", "+SML", "+DACA", "+DPS-random"}
    # the d1-like regime: the ratio acts (mu >= 2), prompt masking, a KL term
    assert all(c.config.train.mu >= 2 and c.config.sml.p_mask_prompt > 0 and c.config.loss.beta > 0 for c in cells)
    sudoku = next(c for c in cells if c.config.train.task == "sudoku_tiny")
    assert sudoku.config.rollout.gen_length == sudoku.config.eval.gen_length == FIVE["sudoku"].gen_length
    assert sudoku.config.train.init.endswith("sudoku/final")
    assert sudoku.config.train.reward == "dense" and sudoku.config.train.steps == FIVE["sudoku"].rl["train.steps"]
    # one test set for every cell of a family, whatever the seed
    assert {c.config.train.test_seed for c in cells} == {0} and len({c.config.train.seed for c in cells}) >= 4
    # tiny-full keeps one family for each of the paper's four areas
    full = PRESETS["tiny-full"]
    assert {spec.family for spec in (task_spec(f.task) for f in full.families.values())} == {
        "math",
        "code",
        "constraint",
        "json",
    }
    # ... each scored on FULL_EVAL distinct test prompts, all of them in the split
    for label, fam in full.families.items():
        n = fam.rl["train.n_eval"]
        assert n == FULL_EVAL[label] >= 256 and fam.canvas == FIVE[label].canvas
        drawn = draw_test(fam.task, "test", n, fam.rl.get("train.test_seed", 0), fam.rl.get("train.test_exclude", ""))
        assert len({s.prompt for s in drawn.samples}) == n


def _slow_job(folder: str, steps: int) -> dict:

    with open(Path(folder) / "metrics.jsonl", "a") as f:
        for s in range(1, steps + 1):
            f.write(json.dumps({"step": s}) + "\n")
    if steps == 3:
        raise RuntimeError("boom")
    return {"status": "done", "steps": steps}


def test_jobs_read_progress_from_metrics_and_survive_a_failing_job(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "metrics.jsonl").write_text('{"step": 1}\n{"step": 2}\n{"ste')  # a half-written line
    assert steps_done(tmp_path / "a") == 2 and steps_done(tmp_path / "missing") == 0
    jobs = [
        Job("a", _slow_job, (str(tmp_path / "a"), 5), tmp_path / "a", 5),
        Job("b", _slow_job, (str(tmp_path / "b"), 3), tmp_path / "b", 3, weight=2.0),
    ]
    results = run_jobs(jobs, workers=2, progress=False, poll_s=0.05)
    assert results[0] == {"status": "done", "steps": 5}
    assert results[1]["status"] == "failed" and "boom" in results[1]["error"]


def test_calibrate_prints_a_family_s_curve_per_lr(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(PRESETS, "mini", MINI)
    args = [
        "reproduce",
        "--preset",
        "mini",
        "--work-dir",
        str(tmp_path),
        "--calibrate",
        "math",
        "--lrs",
        "1e-4",
        "1e-3",
        "--steps",
        "2",
        "--no-progress",
    ]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "math (arithmetic): RL start" in out
    rows = [line for line in out.splitlines() if line.startswith("| baseline |")]
    assert [r.split("|")[2].strip() for r in rows] == ["0.0001", "0.001"]
    assert all("| 1:" in r for r in rows)  # a dev evaluation every fifth of the run (the last one is "final")
    assert "on the dev split" in out
    assert main(args + ["--set", "train.reward=exact"]) == 0
    assert "math (arithmetic, train.reward=exact): RL start" in capsys.readouterr().out
    cells = sorted((tmp_path / "calibrate-math" / "train.reward=exact").glob("base=*/config.json"))
    configs = [json.loads(c.read_text())["train"] for c in cells]
    assert len(configs) == 2 and {(c["reward"], c["eval_split"]) for c in configs} == {("exact", "dev")}


def test_calibrate_names_each_base_s_rows(tmp_path, monkeypatch, capsys):
    """A preset with several bases (tiny-block: grpo and tracerl) prints each arm under its base's name,
    grpo's rows as before: two rows both labelled 'baseline' would not say which base collapsed."""
    monkeypatch.setitem(PRESETS, "mini", replace(MINI, bases=("grpo", "gspo"), variants=("baseline",)))
    args = ["reproduce", "--preset", "mini", "--work-dir", str(tmp_path), "--calibrate", "math"]
    assert main(args + ["--lrs", "1e-4", "--steps", "1", "--no-progress"]) == 0
    rows = [line.split("|")[1].strip() for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    assert rows[1:] == ["baseline", "gspo baseline"]  # rows[0] is the header


@pytest.mark.parametrize(
    "extra,message",
    [
        (["--set", "train.reward"], "is not KEY=VALUE"),
        (["--set", "train.reward=exact"], "--set works with --calibrate"),
    ],
)
def test_set_needs_key_value_and_calibrate(extra, message, capsys):
    args = ["reproduce", "--preset", "tiny-full", "--no-progress"] + (
        ["--calibrate", "math"] if "=" not in extra[1] else []
    )
    assert main(args + extra) == 2
    assert message in capsys.readouterr().err


def test_families_picks_a_tiny_preset_s_families_and_names_the_known_ones(capsys):
    assert main(["reproduce", "--preset", "tiny-full", "--families", "sudoku_", "--no-progress"]) == 2
    assert "did you mean sudoku" in capsys.readouterr().err


def test_sft_markdown_names_the_sft_check_s_prompt_count():
    from daca_bench.experiments.grid.pipeline import sft_markdown

    md = sft_markdown(
        {"json": {"task": "json_tiny", "steps": 1600, "dev_accuracy": 0.492, "accuracy": 0.609, "n_eval": 256}}
    )
    assert (
        "test exact % (SFT's check) | test prompts |" in md
        and md.splitlines()[-1] == "| json | json_tiny | 1600 | 49.2 | 60.9 | 256 |"
    )


def test_tiny_full_is_the_exploratory_grid_powered_on_fresh_seeds_and_prompts(tmp_path):
    """The confirmation's cells are the exploratory tiny-full's (results/tiny-full-exploratory) with
    sudoku at 16 seeds and code at 64 steps (its two supplements), on seeds 24-39 and, but for math,
    a test draw with seed 1 that skips configs/scored/<task>.txt; nothing else in a config moves."""
    full, old = PRESETS["tiny-full"], PRESETS["tiny-full-exploratory"]
    sft = {label: {"folder": str(tmp_path / label)} for label in full.families}
    new = reproduce.tiny_cells(full, sft)
    before = {(c.config.train.task, c.axes["variant"]): c.config for c in reproduce.tiny_cells(old, sft)}
    assert list(full.families) == list(old.families) and full.confirmatory and full.design
    seeds = lambda task: {c.config.train.seed for c in new if c.config.train.task == task}  # noqa: E731
    assert (
        seeds("sudoku_tiny") == set(range(24, 40))
        and seeds("python_tiny") == seeds("json_tiny") == seeds("arithmetic_tiny") == set(range(24, 32))
        and len(new) == 4 * (3 * 8 + 16)
    )
    for c in new:
        t = c.config.train
        math = t.task == "arithmetic_tiny"
        moved = {
            "seed": t.seed,
            "steps": 64 if t.task == "python_tiny" else t.steps,
            "test_seed": 0 if math else 1,
            "test_exclude": "" if math else f"configs/scored/{t.task}.txt",
        }
        ref = before[(t.task, c.axes["variant"])]
        assert c.config == replace(ref, train=replace(ref.train, **moved))
    # --seeds still sets every family's seeds
    assert {c.config.train.seed for c in reproduce.tiny_cells(full, sft, seeds=(0, 1))} == {0, 1}


def test_tiny_full_s_seeds_and_test_prompts_are_fresh_against_every_committed_table(committed_seeds):
    """What the four-area confirmation promises: none of its seeds ran in another committed results
    folder, and no prompt of its code, json and sudoku test sets was scored by one (prompt texts,
    read from the folders' eval.jsonl by scripts/scored_prompts.py; math's split is too small to draw
    fresh ones: all 510 were scored, which its design says)."""
    import importlib.util

    script = ROOT / "scripts" / "scored_prompts.py"
    spec = importlib.util.spec_from_file_location("scored_prompts", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    scored = module.scored(set(module.DRAWN_AGAINST))  # task -> {id: prompt digest}, every folder drawn at seed 0
    # (tiny-compute came after tiny-full and skips its prompts: tests/unit/grid/test_compute_grid.py)
    full, used = PRESETS["tiny-full"], committed_seeds(skip="tiny-full")
    for label, fam in full.families.items():
        assert not set(fam.seeds or full.seeds) & used, label
        n, seed, exclude = (
            fam.rl["train.n_eval"],
            fam.rl.get("train.test_seed", 0),
            fam.rl.get("train.test_exclude", ""),
        )
        drawn = draw_test(fam.task, "test", n, seed, exclude).samples
        if label == "math":
            assert not exclude and len(drawn) == len(get_task(fam.task, split="test", n=10_000).samples) == 510
            continue
        digests = {prompt_digest(s.prompt) for s in drawn}
        assert exclude and len(digests) == n and not digests & set(scored[fam.task].values()), label
        assert not {s.id for s in drawn} & set(scored[fam.task]) and not digests & read_excluded(exclude)
