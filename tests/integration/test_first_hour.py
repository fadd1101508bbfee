"""A new user's first hour: a grid survives a killed worker, `eval` never reports another model's
rows, every canvas is checked before the first step, a core-only install names the extra."""

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from daca_bench.experiments.grid.ablation import expand
from daca_bench.experiments.grid.executors import run_local

from repo_paths import ROOT

QUICK = {
    "train.task": "even_length",
    "train.prompts_per_step": 2,
    "train.num_generations": 4,
    "train.n_eval": 4,
    "train.init": "",
    "train.threads": 1,
    "rollout.block_length": 4,
    "rollout.steps": 4,
    "eval.block_length": 4,
    "eval.steps": 4,
}


def _workers() -> list[int]:
    """This process's spawned pool workers (not the resource tracker)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int(
                next(line for line in (entry / "status").read_text().splitlines() if line.startswith("PPid:")).split()[
                    1
                ]
            )
            cmd = (entry / "cmdline").read_bytes()
        except (OSError, StopIteration):
            continue
        if ppid == os.getpid() and b"spawn_main" in cmd:
            out.append(int(entry.name))
    return out


@pytest.mark.slow
def test_a_grid_survives_a_worker_killed_mid_cell(tmp_path, capsys):
    steps = 12
    cells = expand(
        {"overrides": {**QUICK, "train.steps": steps, "train.save_every": 2}, "axes": {"train.seed": [0, 1, 2]}}
    )
    killed = {}

    def kill_one_mid_cell():
        deadline = time.time() + 120
        while time.time() < deadline and not killed:
            started = [
                c.name
                for c in cells
                if (tmp_path / c.name / "checkpoint-2").exists() and not (tmp_path / c.name / "summary.json").exists()
            ]
            workers = _workers()
            if started and workers:
                os.kill(workers[0], signal.SIGKILL)  # what the OOM killer sends
                killed["pid"] = workers[0]
            time.sleep(0.2)

    killer = threading.Thread(target=kill_one_mid_cell, daemon=True)
    killer.start()
    results = run_local(cells, tmp_path, workers=2, retries=1, progress=False)
    killer.join()
    assert killed, "no worker was running a cell to kill"
    # every cell finished in this same run (a worker stopped by the broken pool may finish a queued cell
    # first, which the new pool then finds done: "skipped")
    assert {r["status"] for r in results} <= {"done", "skipped"}
    lost = [r["cell"] for r in results if r.get("worker_lost")]
    assert len(lost) == 1
    err = capsys.readouterr().err
    assert f"the worker running {lost[0]} died (SIGKILL)" in err
    for c in cells:
        assert json.loads((tmp_path / c.name / "summary.json").read_text())["steps"] == steps
        logged = [json.loads(x)["step"] for x in (tmp_path / c.name / "metrics.jsonl").read_text().splitlines()]
        assert logged == list(range(1, steps + 1))  # resumed from its checkpoint: no step logged twice


# ---- eval: rows keyed by the model's identity and the decoding settings ----------------------
def _saved_model(folder: Path, seed: int, canvas: dict | None = None) -> Path:
    """A tiny model saved as a run's final/ (with the run's config.json beside it when canvas is given)."""
    from daca_bench.config import ModelConfig
    from daca_bench.models import load_model

    load_model(ModelConfig(seed=seed)).save(folder / "final")
    if canvas:
        (folder / "config.json").write_text(json.dumps({"sampler": canvas, "sft": {"task": "sudoku_tiny"}}))
    return folder / "final"


def test_eval_never_reports_another_models_rows(tmp_path, capsys):
    from daca_bench.cli import main

    out = tmp_path / "eval"
    common = ["--task", "arithmetic", "--gen-length", "8", "--n", "3", "--output-dir", str(out), "--no-progress"]
    assert main(["eval", "--model", "tiny", *common]) == 0
    other = _saved_model(tmp_path / "run", seed=1)
    capsys.readouterr()
    assert main(["eval", "--model", str(other), *common]) == 2  # refused: the folder holds tiny's rows
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "holds the rows of model tiny" in err[0] and "--fresh" in err[0]
    assert main(["eval", "--model", str(other), *common, "--fresh"]) == 0
    assert json.loads((out / "model.json").read_text())["model"] == str(other.resolve())
    assert len((out / "samples.jsonl").read_text().splitlines()) == 3  # tiny's rows are gone
    # the same folder retrained in place (new weights) is another model
    _saved_model(tmp_path / "run", seed=2)
    capsys.readouterr()
    assert main(["eval", "--model", str(other), *common]) == 2
    assert (
        capsys.readouterr()
        .err.strip()
        .endswith("with other weights; choose another --output-dir, or --fresh to start over there")
    )
    # other decoding settings are recomputed, never read from the rows of the first
    assert main(["eval", "--model", str(other), *common, "--fresh"]) == 0
    assert main(["eval", "--model", str(other), *common, "--steps", "8"]) == 0
    rows = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()]
    assert len(rows) == 6 and len({r["decoding"] for r in rows}) == 2
    assert "| 8 | 3 |" in capsys.readouterr().out


def test_eval_default_folder_is_named_after_the_model():
    from daca_bench.eval.records import default_output

    assert default_output("arithmetic", "runs/sft-tiny/final") == Path("runs/eval-arithmetic-sft-tiny-final")
    assert default_output("gsm8k", "GSAI-ML/LLaDA-8B-Instruct") == Path("runs/eval-gsm8k-GSAI-ML-LLaDA-8B-Instruct")
    assert default_output("arithmetic", "tiny") == Path("runs/eval-arithmetic-tiny")


def test_sample_and_eval_take_the_canvas_of_the_run_that_trained_the_model(tmp_path, capsys):
    from daca_bench.cli import main

    canvas = {"gen_length": 18, "block_length": 18, "steps": 9}
    model = _saved_model(tmp_path / "run", seed=0, canvas=canvas)
    assert (
        main(
            [
                "sample",
                "--model",
                str(model),
                "--task",
                "sudoku_tiny",
                "--n",
                "2",
                "--output",
                str(tmp_path / "s.jsonl"),
            ]
        )
        == 0
    )
    rows = [json.loads(x) for x in (tmp_path / "s.jsonl").read_text().splitlines()]
    assert [len(r["commit_step"]) for r in rows] == [18, 18]
    assert "canvas from" in capsys.readouterr().err
    assert (
        main(
            [
                "eval",
                "--model",
                str(model),
                "--task",
                "sudoku_tiny",
                "--n",
                "2",
                "--no-progress",
                "--output-dir",
                str(tmp_path / "e"),
            ]
        )
        == 0
    )
    assert "| 18 | 2 | " in capsys.readouterr().out
    # the default canvas of 8 cannot hold a 16-digit grid: the family's canvas (18, 9 steps) is taken, and said;
    # so is that tiny has random weights
    assert (
        main(["sample", "--model", "tiny", "--task", "sudoku_tiny", "--n", "2", "--output", str(tmp_path / "t.jsonl")])
        == 0
    )
    err = capsys.readouterr().err
    assert (
        "the default canvas cannot hold sudoku_tiny's answers (16 tokens); sampling on sampler.gen_length=18 "
        "sampler.block_length=18 sampler.steps=9" in err
    )
    assert "model tiny is built with random weights" in err
    assert [len(json.loads(x)["commit_step"]) for x in (tmp_path / "t.jsonl").read_text().splitlines()] == [18, 18]
    # a canvas the user chose is never replaced: one line, before any sampling
    assert main(["sample", "--model", "tiny", "--task", "sudoku_tiny", "--n", "2", "sampler.gen_length=8"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        "daca-bench sample: sampler.gen_length=8 cannot hold sudoku_tiny's longest gold answer (16 tokens);"
    )


# ---- every canvas checked before the first step ------------------------------------------
def test_sft_refuses_a_bad_canvas_before_the_first_step(tmp_path, capsys):
    from daca_bench.cli import main

    out = tmp_path / "sft"
    assert (
        main(
            [
                "sft",
                "--config",
                "configs/tiny_sft.yaml",
                "sampler.gen_length=10",
                "--output-dir",
                str(out),
                "--no-progress",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "daca-bench sft: sampler.gen_length=10 must be a multiple of sampler.block_length=8: "
        "set sampler.block_length=10, or sampler.gen_length=16"
    ]
    assert not (out / "metrics.jsonl").exists()


def test_train_checks_rollout_and_eval_canvases_before_the_first_step(tmp_path, capsys):
    from daca_bench.canvas import check_rl
    from daca_bench.cli import main
    from daca_bench.config import RLConfig, load_config

    base = ["train", "--config", "configs/tiny.yaml", "--output-dir", str(tmp_path), "--no-progress", "train.init="]
    assert main([*base, "rollout.gen_length=10"]) == 2
    assert "rollout.gen_length=10 must be a multiple of rollout.block_length=8" in capsys.readouterr().err
    assert main([*base, "train.task=sudoku_tiny"]) == 2
    assert "rollout.gen_length=8 cannot hold sudoku_tiny's longest gold answer" in capsys.readouterr().err
    assert not (tmp_path / "metrics.jsonl").exists()
    # a rollout canvas unlike the eval canvas is said, not dropped silently
    check_rl(
        load_config("configs/tiny.yaml", ["train.init=", "rollout.gen_length=16", "rollout.block_length=16"], RLConfig)
    )
    assert "rollouts use a canvas of 16 (block 16) but the test evaluation 8" in capsys.readouterr().err


def test_train_without_its_sft_start_says_how_to_make_it(tmp_path, capsys, monkeypatch):
    from daca_bench.cli import main

    monkeypatch.chdir(tmp_path)  # no runs/sft-tiny/final here
    assert main(["train", "--config", str(ROOT / "configs" / "tiny.yaml"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "no such model folder runs/sft-tiny/final" in err and "daca-bench sft --config configs/tiny_sft.yaml" in err


def test_sft_says_when_it_resumed_and_has_nothing_left(tmp_path, capsys):
    from daca_bench.cli import main

    args = [
        "sft",
        "--config",
        "configs/tiny_sft.yaml",
        "sft.steps=2",
        "sft.n_eval=4",
        "sft.save_every=1",
        "sft.batch_size=8",
        "sft.n_train=64",
        "--output-dir",
        str(tmp_path),
        "--no-progress",
    ]
    assert main(args) == 0
    assert "tokens/s" in capsys.readouterr().out
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "no step left to run, resumed at step 2" in out and "0 tokens/s" not in out


# ---- one line instead of a traceback -------------------------------------------------------
@pytest.mark.parametrize(
    "argv,blocked,extra",
    [
        (["sample", "--help"], "torch", "train"),
        (["sft", "--task", "x"], "torch", "train"),
        (["table", "x"], "numpy", "tables"),
        (["plot", "x"], "numpy", "tables"),
    ],
)
def test_a_core_only_install_names_the_extra_to_install(argv, blocked, extra):
    import subprocess
    import sys

    code = (
        f"import sys; sys.modules[{blocked!r}] = None\n"  # as if the package were not installed
        "from daca_bench.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    proc = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"daca-bench {argv[0]}: needs the Python package {blocked!r}, which is not installed here; "
        f"pip install 'daca-bench[{extra}]'"
    ]


def test_a_tasks_dir_that_does_not_exist_is_an_error(tmp_path, capsys):
    from daca_bench.cli import main

    assert main(["tasks", "--tasks-dir", str(tmp_path / "nope")]) == 2
    assert (
        capsys.readouterr().err.strip() == f"daca-bench tasks: --tasks-dir {tmp_path / 'nope'}: no such folder; "
        "give a folder of task files"
    )


def test_verify_keeps_the_quotes_of_a_bad_record_and_says_what_arithmetic_takes(tmp_path, capsys):
    from daca_bench.cli import main

    (tmp_path / "in.jsonl").write_text(
        '{"expression": "3*4", "completion": "12"}\n\n{"expression": "3+4", "completion": "7"}\n'
    )
    assert (
        main(["verify", "arithmetic", "--input", str(tmp_path / "in.jsonl"), "--output", str(tmp_path / "o.jsonl")])
        == 2
    )
    rows = [json.loads(x) for x in (tmp_path / "o.jsonl").read_text().splitlines()]
    assert rows[0]["error"].endswith("joined by + and - only): '3*4'")
    assert rows[1]["status"] == "bad_input" and "blank line" in rows[1]["error"]  # as tasks/README.md says
    assert rows[2]["status"] == "correct"


def _dies_once(folder: str) -> dict:
    marker = Path(folder) / "tried"
    if not marker.exists():
        marker.write_text("1")
        os.kill(os.getpid(), signal.SIGKILL)
    return {"status": "done"}


def _always_dies(folder: str) -> dict:
    os.kill(os.getpid(), signal.SIGKILL)


def test_jobs_retry_a_job_whose_worker_died_once_then_report_it(tmp_path, capsys):
    from daca_bench.experiments.grid.jobs import Job, run_jobs

    for name in ("once", "always"):
        (tmp_path / name).mkdir()
    jobs = [
        Job("once", _dies_once, (str(tmp_path / "once"),), tmp_path / "once", 1),
        Job("always", _always_dies, (str(tmp_path / "always"),), tmp_path / "always", 1),
    ]
    once, always = run_jobs(jobs, workers=2, progress=False, poll_s=0.05, lost_retries=1)
    assert once == {"status": "done", "worker_lost": 1}
    assert always["status"] == "failed" and always["worker_lost"] == 2 and "SIGKILL" in always["error"]
    err = capsys.readouterr().err
    assert "the worker running once died (SIGKILL)" in err and "the worker running always died again (SIGKILL)" in err


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_killed_runner_takes_its_workers_with_them_checkpointing(tmp_path):
    """`ablate` / `reproduce` killed (SIGKILL, no cleanup): its pool workers get SIGTERM, so no orphan
    keeps training into the grid's folders, and the cell checkpoints on the way out."""
    import subprocess

    import yaml

    grid = tmp_path / "grid.yaml"
    grid.write_text(
        yaml.safe_dump(
            {
                "overrides": {
                    "train.task": "arithmetic",
                    "train.init": "",
                    "train.steps": 500,
                    "train.save_every": 1000,
                    "train.prompts_per_step": 2,
                    "train.num_generations": 4,
                    "train.n_eval": 4,
                    "train.threads": 1,
                },
                "axes": {"train.seed": [0]},
            }
        )
    )
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "daca_bench", "ablate", str(grid), "--workers", "1", "--output-dir", str(out)],
        cwd=ROOT,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    metrics, deadline = out / "seed=0" / "metrics.jsonl", time.time() + 180
    while time.time() < deadline and not (metrics.exists() and len(metrics.read_text().splitlines()) >= 2):
        time.sleep(0.2)
    workers = [p for p in _children(proc.pid) if b"spawn_main" in Path(f"/proc/{p}/cmdline").read_bytes()]
    assert workers, "the runner started no worker"
    proc.kill()
    proc.wait()
    deadline = time.time() + 60
    while time.time() < deadline and any(Path(f"/proc/{p}").exists() and _state(p) != "Z" for p in workers):
        time.sleep(0.2)
    assert not any(Path(f"/proc/{p}").exists() and _state(p) != "Z" for p in workers), "an orphan worker lives on"
    assert list((out / "seed=0").glob("checkpoint-*")), "the worker did not checkpoint on SIGTERM"


def _children(pid: int) -> list[int]:
    kids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    kids.append(int(entry.name))
            except (OSError, IndexError, ValueError):
                continue
    return kids


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"
