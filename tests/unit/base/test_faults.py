"""Faults and bad input: every everyday mistake is one line and exit 2, JSONL input keeps
every line, checkpoints survive damage and a full disk."""

import pytest

from daca_bench.cli import main

from repo_paths import FIXTURES

TINY_RL = [
    "train.steps=1",
    "train.n_eval=2",
    "train.prompts_per_step=2",
    "train.num_generations=2",
    "rollout.block_length=4",
    "rollout.steps=4",
    "eval.block_length=4",
    "eval.steps=4",
]


def _mistakes(d):
    """(name, argv) for the everyday mistakes; `d` is a scratch folder with a few bad files in it."""
    (d / "bad.yaml").write_text("train:\n  steps: [1\n")
    (d / "latin1.yaml").write_bytes(b"# caf\xe9\ntrain:\n  steps: 1\n")
    (d / "grid_bad.yaml").write_text("axes: {variant: [a\n")
    (d / "a_file").write_text("x")
    (d / "good.jsonl").write_text('{"expression": "1+1", "answer": "2", "completion": "2"}\n')
    (d / "empty_dir").mkdir()
    return [
        ("verify: missing --input", ["verify", "arithmetic", "--input", f"{d}/nope.jsonl", "--output", f"{d}/o.jsonl"]),
        ("verify: a folder as --input", ["verify", "arithmetic", "--input", str(d), "--output", f"{d}/o.jsonl"]),
        (
            "verify: --output in a missing folder",
            ["verify", "arithmetic", "--input", f"{d}/good.jsonl", "--output", f"{d}/no/such/o.jsonl"],
        ),
        ("verify: unknown task", ["verify", "arithmetc", "--input", f"{d}/good.jsonl", "--output", f"{d}/o.jsonl"]),
        ("train: unknown task", ["train", "--no-progress", "--output-dir", f"{d}/r1", "train.task=nope", *TINY_RL]),
        ("sft: unknown task", ["sft", "--no-progress", "--output-dir", f"{d}/r2", "sft.task=nope"]),
        ("sample: unknown task", ["sample", "--task", "nope"]),
        ("train: missing --config", ["train", "--config", f"{d}/nope.yaml"]),
        ("train: YAML syntax error", ["train", "--config", f"{d}/bad.yaml"]),
        ("sft: a folder as --config", ["sft", "--config", str(d)]),
        ("sft: a config that is not UTF-8", ["sft", "--config", f"{d}/latin1.yaml"]),
        ("train: unknown override key", ["train", "train.stpes=3"]),
        (
            "train: train.init a missing folder",
            ["train", "--no-progress", "--output-dir", f"{d}/r3", f"train.init={d}/sft/final", *TINY_RL],
        ),
        (
            "train: train.init a folder without a model",
            ["train", "--no-progress", "--output-dir", f"{d}/r4", f"train.init={d}/empty_dir", *TINY_RL],
        ),
        ("sample: --model a missing folder", ["sample", "--task", "arithmetic", "--model", f"{d}/missing"]),
        ("sample: --output in a missing folder", ["sample", "--task", "arithmetic", "--output", f"{d}/no/x.jsonl"]),
        ("likelihood-bias: --model a missing folder", ["likelihood-bias", "--model", f"{d}/missing"]),
        ("ablate: missing grid", ["ablate", f"{d}/nogrid.yaml"]),
        ("ablate: grid YAML syntax error", ["ablate", f"{d}/grid_bad.yaml"]),
        ("table: missing results folder", ["table", f"{d}/nothing"]),
        ("plot: missing results folder", ["plot", f"{d}/nothing"]),
        ("train: --output-dir is a file", ["train", "--no-progress", "--output-dir", f"{d}/a_file", *TINY_RL]),
        ("sft: --output-dir under a file", ["sft", "--no-progress", "--output-dir", f"{d}/a_file/run"]),
        ("reproduce: unknown preset", ["reproduce", "--preset", "tinyy"]),
    ]


def test_every_everyday_mistake_is_one_line_and_exit_2(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("DACA_BENCH_TRACEBACK", raising=False)
    cases = _mistakes(tmp_path)
    assert len(cases) >= 16
    for name, argv in cases:
        code = main(argv)
        err = capsys.readouterr().err
        lines = [line for line in err.splitlines() if line.strip()]
        assert code == 2, f"{name}: exit {code}\n{err}"
        assert "Traceback" not in err, f"{name}:\n{err}"
        assert len(lines) == 1, f"{name}: {len(lines)} lines\n{err}"
        assert lines[0].startswith(f"daca-bench {argv[0]}: "), f"{name}: {lines[0]}"


def test_messages_name_the_input(tmp_path, capsys):
    cases = dict(_mistakes(tmp_path))
    for name, needle in [
        ("verify: missing --input", "nope.jsonl"),
        ("train: YAML syntax error", "bad.yaml: not valid YAML at line"),
        ("verify: --output in a missing folder", "does not exist"),
        ("train: train.init a missing folder", f"{tmp_path}/sft/final"),
        ("ablate: missing grid", "nogrid.yaml: no such grid file"),
        ("sft: unknown task", "unknown task 'nope'"),
    ]:
        assert main(cases[name]) == 2
        assert needle in capsys.readouterr().err, name


def test_traceback_flag_and_variable_show_it_and_a_bug_keeps_it(tmp_path, capsys, monkeypatch):
    argv = ["ablate", str(tmp_path / "nogrid.yaml")]
    assert main(["--traceback", *argv]) == 2
    err = capsys.readouterr().err
    assert "Traceback" in err and err.strip().splitlines()[-1].startswith("daca-bench ablate: ")
    monkeypatch.setenv("DACA_BENCH_TRACEBACK", "1")
    assert main(argv) == 2 and "Traceback" in capsys.readouterr().err
    monkeypatch.delenv("DACA_BENCH_TRACEBACK")

    import daca_bench.experiments.grid.ablation as ablation

    def buggy(args):  # a unit-test double for a bug deep in a command
        return {}["missing"]

    monkeypatch.setattr(ablation, "run", buggy)
    with pytest.raises(KeyError):
        main(argv)


# ---- line-faithful JSONL ------------------------------------------------------------------
def _mixed_file(path):
    """Good lines mixed with every kind of bad line; returns the expected status per line."""
    import json

    good = [
        {"expression": "1+1", "answer": "2", "completion": "2"},
        {"expression": "2+3", "answer": "5", "completion": "4"},
    ]
    lines = [
        (json.dumps(good[0]).encode(), "correct"),
        (b'{"expression": "1+1", "answer": "2", "completion": "caf\xff\xfe"}', "bad_input"),  # invalid UTF-8
        (b"{not json", "bad_input"),
        (b'{"expression": "1+1", "answer": "2", "completion": "2", "n": ' + b"9" * 1_000_000 + b"}", "bad_input"),
        (b"", "bad_input"),  # blank line
        (b"   ", "bad_input"),  # blank line of spaces
        (b'{"expression": "1+1", "answer": "2", "completion": "2 \\ud800"}', None),  # lone surrogate: scored
        (
            b'{"expression": "1+1", "answer": "2", "completion": "\xe2\x80\xa8 2 \xc3\xa9"}',
            None,
        ),  # U+2028 inside a line
        (b"[1, 2]", "bad_input"),
        (b'{"expression": "1+1", "answer": "2"}', "bad_input"),  # no completion
        (b'{"expression": "1+1", "answer": "2", "completion": NaN}', "bad_input"),
        (b'{"answer": "2", "completion": 7}', "bad_input"),  # a completion that is not text
        (json.dumps(good[1]).encode() + b"\r", "wrong"),  # a CRLF line
    ]
    path.write_bytes(b"\n".join(raw for raw, _ in lines) + b"\n")
    return [status for _, status in lines], good


def test_verify_writes_one_record_per_input_line_in_order(tmp_path, capsys):
    import json

    src, dst = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    expected, good = _mixed_file(src)
    assert main(["verify", "arithmetic", "--input", str(src), "--output", str(dst)]) == 2
    err = capsys.readouterr().err
    raw = dst.read_bytes()
    raw.decode("utf-8")  # valid UTF-8 throughout
    rows = [json.loads(line) for line in raw.decode("utf-8").split("\n")[:-1]]
    assert len(rows) == len(expected)
    for number, (row, status) in enumerate(zip(rows, expected), 1):
        if status is not None:
            assert row["status"] == status, (number, row)
        if row["status"] == "bad_input":
            assert row["error"].startswith(f"{src}:{number}: "), row
            assert f"{src}:{number}: bad_input" in err
    assert rows[4]["error"].endswith("blank line") and rows[1]["error"].split(": ", 1)[1].startswith("not UTF-8")
    assert "Exceeds the limit" in rows[3]["error"] and len(rows[3]["raw"]) <= 2000
    assert rows[6]["completion"] == "2 \ud800" and rows[6]["status"] in ("correct", "wrong")
    assert "\\ud800" in raw.decode("utf-8").split("\n")[6]  # escaped, never a broken byte sequence
    assert rows[7]["completion"] == "\u2028 2 \u00e9"
    # the good lines score exactly as they would alone
    alone = tmp_path / "alone.jsonl"
    alone.write_text("".join(json.dumps(g) + "\n" for g in good))
    assert main(["verify", "arithmetic", "--input", str(alone), "--output", str(tmp_path / "alone_out.jsonl")]) == 0
    by_itself = [json.loads(x) for x in (tmp_path / "alone_out.jsonl").read_text().splitlines()]
    assert [rows[0], rows[-1]] == by_itself


def test_jsonl_writer_is_valid_utf8_json_for_odd_strings():
    import json

    from daca_bench.jsonl import dumps_line

    for record in [
        {"c": "\ud800x"},
        {"c": "\udfff\ud800"},
        {"c": "é\u2028"},
        {"r": float("nan"), "x": [float("inf")]},
        {"c": "\x00\x1f"},
    ]:
        line = dumps_line(record)
        assert line.endswith("\n") and line.count("\n") == 1
        back = json.loads(line.encode("utf-8").decode("utf-8"))
        assert back == {
            k: (None if isinstance(v, float) else [None] if isinstance(v, list) else v) for k, v in record.items()
        }


def test_a_local_task_file_reads_through_the_same_reader(tmp_path):
    from daca_bench.config import ConfigError
    from daca_bench.registry import get_task

    fix = FIXTURES / "gsm8k.jsonl"
    text = fix.read_bytes()
    data = tmp_path / "gsm8k.jsonl"
    data.write_bytes(text.replace(b"\n", b"\n\n", 1))  # a blank line is skipped
    assert len(get_task("gsm8k", path=data).samples) == len(get_task("gsm8k", path=fix).samples)
    data.write_bytes(text + b"{broken\n\xff\n")
    n = len(text.splitlines())
    with pytest.raises(ConfigError, match=rf"gsm8k.jsonl:{n + 1}: not JSON.*and 1 more bad lines"):
        get_task("gsm8k", path=data)


# ---- checkpoints that can be trusted -------------------------------------------------------
def _sft(run, steps, *flags):
    """`daca-bench sft` argv for a tiny run with a checkpoint every 2 steps."""
    return [
        "sft",
        "--no-progress",
        *flags,
        "--output-dir",
        str(run),
        f"sft.steps={steps}",
        "sft.save_every=2",
        "sft.n_train=64",
        "sft.batch_size=8",
        "sft.n_eval=4",
        "sft.threads=1",
    ]


@pytest.fixture(scope="module")
def sft_run(tmp_path_factory):
    """A finished 4-step SFT run with checkpoint-2 and checkpoint-4."""
    run = tmp_path_factory.mktemp("sft") / "run"
    assert main(_sft(run, 4)) == 0
    return run


def _copy(run, tmp_path):
    import shutil

    shutil.copytree(run, tmp_path / "run")
    return tmp_path / "run"


def _truncate(f):
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])


def _garbage(f):
    f.write_bytes(b"\x00garbage" * 10)


DAMAGE = {
    "weights truncated": lambda c: _truncate(c / "model.safetensors"),
    "weights missing": lambda c: (c / "model.safetensors").unlink(),
    "weights garbage of the same size": lambda c: (c / "model.safetensors").write_bytes(
        b"\xff" * (c / "model.safetensors").stat().st_size
    ),
    "state truncated": lambda c: _truncate(c / "trainer_state.pt"),
    "state garbage": lambda c: _garbage(c / "trainer_state.pt"),
    "state missing": lambda c: (c / "trainer_state.pt").unlink(),
    "config garbage": lambda c: _garbage(c / "config.json"),
    "config missing": lambda c: (c / "config.json").unlink(),
    "tokenizer missing": lambda c: (c / "tokenizer.json").unlink(),
    "manifest garbage": lambda c: _garbage(c / "manifest.json"),
    "state of another step": lambda c: (c / "trainer_state.pt").write_bytes(
        (c.parent / "checkpoint-2" / "trainer_state.pt").read_bytes()
    ),
}


def test_limit_keeps_the_newest_and_a_finished_run_has_them(sft_run):
    assert sorted(p.name for p in sft_run.iterdir() if p.name.startswith(("checkpoint", ".checkpoint"))) == [
        "checkpoint-2",
        "checkpoint-4",
    ]


@pytest.mark.parametrize("kind", list(DAMAGE))
def test_a_damaged_newest_checkpoint_falls_back_to_the_older_one(kind, sft_run, tmp_path, capsys):
    from daca_bench.engine.checkpoint import resume_point

    run = _copy(sft_run, tmp_path)
    DAMAGE[kind](run / "checkpoint-4")
    assert resume_point(run) == run / "checkpoint-2"
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "checkpoint-4 is damaged" in err[0] and "resuming from checkpoint-2" in err[0]


def test_resume_after_damage_continues_from_the_older_checkpoint(sft_run, tmp_path, capsys):
    import json

    run = _copy(sft_run, tmp_path)
    DAMAGE["state missing"](run / "checkpoint-4")
    assert main(_sft(run, 6)) == 0
    steps = [json.loads(x)["step"] for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3, 4, 5, 6]  # never started from step 0: 1-2 kept, 3-6 retrained
    assert sorted(p.name for p in run.glob("checkpoint-*")) == ["checkpoint-4", "checkpoint-6"]
    assert "resuming from checkpoint-2" in capsys.readouterr().err


def test_no_intact_checkpoint_or_none_at_all_refuses_in_one_line(sft_run, tmp_path, capsys):
    run = _copy(sft_run, tmp_path)
    DAMAGE["state garbage"](run / "checkpoint-4")
    DAMAGE["weights truncated"](run / "checkpoint-2")
    metrics = (run / "metrics.jsonl").read_text()
    assert main(_sft(run, 6)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no intact checkpoint" in err[0] and "--fresh" in err[0] and "Traceback" not in err[0]
    for c in run.glob("checkpoint-*"):
        __import__("shutil").rmtree(c)
    assert main(_sft(run, 6)) == 2  # a run without checkpoints: not silently anew
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "already holds a run" in err[0] and "--fresh" in err[0]
    assert (run / "metrics.jsonl").read_text() == metrics  # nothing overwritten
    assert main(_sft(run, 2, "--fresh")) == 0
    assert len((run / "metrics.jsonl").read_text().splitlines()) == 2


def test_an_old_single_checkpoint_folder_still_resumes(sft_run, tmp_path):
    from daca_bench.engine.checkpoint import resume_point

    run = _copy(sft_run, tmp_path)
    (run / "checkpoint-4").rename(run / "checkpoint")
    (run / "checkpoint" / "manifest.json").unlink()  # the old layout had none
    __import__("shutil").rmtree(run / "checkpoint-2")
    assert resume_point(run) == run / "checkpoint"


# ---- a full disk ---------------------------------------------------------------------------
@pytest.fixture
def small_disk(tmp_path, request):
    """A real tmpfs of `request.param` (default 16 MB: room for one tiny checkpoint of about 10 MB, not two)."""
    import subprocess

    mnt = tmp_path / "disk"
    mnt.mkdir()
    size = getattr(request, "param", "16m")
    res = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)], capture_output=True, text=True
    )
    if res.returncode:
        pytest.skip(f"cannot mount a tmpfs here ({res.stderr.strip() or 'mount failed'}; needs root)")
    yield mnt
    subprocess.run(["umount", str(mnt)], check=False)


def test_a_full_disk_is_one_line_and_the_previous_checkpoint_survives(small_disk, capsys):
    import subprocess

    from daca_bench.engine.checkpoint import find_checkpoint

    run = small_disk / "run"
    assert main(_sft(run, 6)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "disk full" in err[0] and str(run) in err[0] and " MB needed" in err[0], err
    assert "checkpoint-2 is intact" in err[0]
    assert not list(run.glob(".checkpoint-*"))  # the partial temporary folder is gone
    assert find_checkpoint(run) == run / "checkpoint-2"
    subprocess.run(["mount", "-o", "remount,size=64m", str(small_disk)], check=True)  # space freed
    assert main(_sft(run, 6)) == 0
    assert [p.name for p in sorted(run.glob("checkpoint-*"))] == ["checkpoint-4", "checkpoint-6"]


@pytest.mark.parametrize("small_disk", ["12m"], indirect=True)
def test_a_full_disk_while_saving_the_final_model_is_one_line(small_disk, capsys):
    run = small_disk / "run"
    assert main(_sft(run, 2)) == 2  # checkpoint-2 fits, final/ does not
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"disk full while saving {run}/final" in err[0], err
    assert not list(run.glob(".final*")) and not (run / "final").exists()
    assert (run / "checkpoint-2").is_dir()


# ---- a failed sharded (DCP) save -------------------------------------------------------------
def test_a_full_disk_during_a_dcp_save_is_one_line_and_the_previous_checkpoint_survives(small_disk, capsys):
    """The real DCP path (SFT under the engine at one process) on a real 16 MB tmpfs: checkpoint-2 fits, not 4."""
    from daca_bench.engine.checkpoint import damage, find_checkpoint

    run = small_disk / "run"
    assert main(_sft(run, 6, "sft.parallel=shard")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"disk full while saving {run}/checkpoint-4" in err[0], err
    assert "checkpoint-2 is intact" in err[0] and "Traceback" not in err[0]
    assert (run / "checkpoint-2" / "dcp").is_dir() and damage(run / "checkpoint-2") is None
    assert find_checkpoint(run) == run / "checkpoint-2" and not list(run.glob(".checkpoint-*"))


@pytest.mark.parametrize("error", ["enospc", "eacces"])
def test_a_failed_dcp_save_names_the_folder_and_the_cause_and_sets_the_partial_folder_aside(
    tmp_path, capsys, monkeypatch, error
):
    """A unit-test double of DCP's writer beside the real full disk above: the second save raises ENOSPC or EACCES."""
    import errno

    import torch.distributed.checkpoint as dcp

    from daca_bench.engine.checkpoint import damage, find_checkpoint

    real, calls = dcp.save, []

    def failing(state, checkpoint_id=None, **kw):
        calls.append(checkpoint_id)
        if len(calls) == 2:
            code = errno.ENOSPC if error == "enospc" else errno.EACCES
            raise OSError(code, os.strerror(code), f"{checkpoint_id}/__0_0.distcp")
        return real(state, checkpoint_id=checkpoint_id, **kw)

    import os

    monkeypatch.setattr(dcp, "save", failing)
    run = tmp_path / "run"
    assert (
        main(["train", "--no-progress", "--output-dir", str(run), *TINY_RL, "train.steps=2", "train.save_every=1"]) == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{run}/checkpoint-2" in err[0] and "checkpoint-1 is intact" in err[0], err
    if error == "enospc":
        assert "disk full" in err[0] and "No space left on device" in err[0]
        assert not list(run.glob(".checkpoint-*"))  # its space is what is missing
    else:
        assert "Permission denied" in err[0] and ".checkpoint-2.failed" in err[0]
        assert [p.name for p in run.glob(".checkpoint-*")] == [".checkpoint-2.failed"]
    assert find_checkpoint(run) == run / "checkpoint-1" and damage(run / "checkpoint-1") is None
    monkeypatch.setattr(dcp, "save", real)  # the cause fixed: the rerun resumes and clears the set-aside folder
    assert (
        main(["train", "--no-progress", "--output-dir", str(run), *TINY_RL, "train.steps=2", "train.save_every=1"]) == 0
    )
    assert find_checkpoint(run) == run / "checkpoint-2" and not list(run.glob(".checkpoint-*"))
