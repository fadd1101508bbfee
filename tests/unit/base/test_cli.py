import json
import subprocess
import sys

import pytest
import torch

from daca_bench.cli import SUBCOMMANDS, main


def test_help_lists_subcommands():
    out = subprocess.run([sys.executable, "-m", "daca_bench", "--help"], capture_output=True, text=True, check=True)
    for name in SUBCOMMANDS:
        assert name in out.stdout


def test_unknown_option_names_close_match(capsys):
    try:
        main(["sft", "--output-dri", "x"])
    except SystemExit as exc:
        assert exc.code == 2
    assert "--output-dir" in capsys.readouterr().err


def test_unknown_command_names_close_match(capsys):
    assert main(["taks"]) == 2
    assert "tasks" in capsys.readouterr().err


def test_tasks_lists_the_tiny_arithmetic_family(capsys):
    assert main(["tasks", "--family", "math"]) == 0
    assert "arithmetic" in capsys.readouterr().out


@pytest.mark.parametrize("command", [["sample", "--task", "arithmetic"], ["sft"], ["likelihood-bias"]])
def test_an_override_the_command_does_not_use_is_an_error_naming_its_keys(capsys, command):
    assert main([*command, "train.lr=9" if command[0] == "sft" else "sft.lr=9"]) == 2
    err = capsys.readouterr().err
    assert "is not used by this command" in err and "model.dtype" in err and "sampler.temperature" in err
    assert ("sft.lr," in err) == (command[0] == "sft")


def test_sample_honours_model_and_sampler_keys_and_moves_the_model_to_the_device(tmp_path, monkeypatch, capsys):
    import daca_bench.models as models

    loaded = []
    real = models.load_model
    monkeypatch.setattr(models, "load_model", lambda cfg: loaded.append(real(cfg)) or loaded[-1])
    out = tmp_path / "s.jsonl"
    assert (
        main(
            [
                "sample",
                "--task",
                "arithmetic",
                "--n",
                "2",
                "--output",
                str(out),
                "model.dtype=bfloat16",
                "model.hidden_size=32",
                "sampler.gen_length=12",
                "sampler.block_length=4",
                "sampler.steps=6",
            ]
        )
        == 0
    )
    (adapter,) = loaded
    assert adapter.model.dtype == torch.bfloat16 and adapter.model.config.hidden_size == 32
    assert adapter.device == models.default_device()
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 2 and all(len(r["commit_step"]) == 12 and max(r["commit_step"]) == 6 for r in rows)


def test_an_option_and_an_override_for_one_key_is_an_error(capsys):
    assert main(["sample", "--task", "arithmetic", "--model", "tiny", "model.name=tiny"]) == 2
    assert "model.name is set both by an option and by an override" in capsys.readouterr().err


def test_an_unknown_dtype_names_the_known_ones(capsys):
    assert main(["sample", "--task", "arithmetic", "model.dtype=bf16"]) == 2
    assert "did you mean bfloat16?" in capsys.readouterr().err


def test_overrides_may_follow_options_and_a_stray_word_is_still_an_error(capsys):
    assert main(["train", "--output-dir", "x", "train.steps=7", "--print-config", "sml.k=3"]) == 0
    out = capsys.readouterr().out
    assert "train.steps = 7 " in out and "sml.k = 3 " in out and "output_dir" in out
    with pytest.raises(SystemExit) as exc:
        main(["train", "sml.k=3", "--print-config", "stray"])
    assert exc.value.code == 2 and "unrecognized arguments: stray" in capsys.readouterr().err
    assert main(["train", "--print-config", "stray"]) == 2
    assert "override 'stray' is not KEY=VALUE" in capsys.readouterr().err


def test_a_closed_pipe_ends_quietly():
    """`daca-bench train --print-config | head -1`: the reader closes the pipe early; no traceback."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "daca_bench", "train", "--print-config"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    first = proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read()
    assert first.startswith("model.name") and proc.wait(timeout=60) == 0
    assert "Traceback" not in err and "BrokenPipeError" not in err
