import json

import pytest
import torch
from safetensors.torch import load_file

from daca_bench.config import RunConfig, apply
from daca_bench.train.sft import encode_completions, train_sft


def _cfg(**sft):
    return apply(RunConfig(), {"sft": {"n_train": 256, "n_eval": 16, "batch_size": 16, "save_every": 5, **sft}})


def test_sft_learns(tmp_path):
    summary = train_sft(_cfg(steps=120, lr=2e-3), tmp_path, progress=False)
    losses = [json.loads(line)["loss"] for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert len(losses) == 120
    assert sum(losses[-20:]) / 20 < 0.7 * sum(losses[:20]) / 20
    assert (tmp_path / "final" / "model.safetensors").exists() and (tmp_path / "summary.json").exists()
    assert 0.0 <= summary["accuracy"] <= 1.0


def test_resumed_sft_equals_uninterrupted(tmp_path):
    train_sft(_cfg(steps=12), tmp_path / "straight", progress=False)
    train_sft(_cfg(steps=7), tmp_path / "resumed", progress=False)  # checkpoint at step 5, "crash" after 7
    assert sorted(p.name for p in (tmp_path / "resumed").glob("checkpoint-*")) == ["checkpoint-5", "checkpoint-7"]
    weights = tmp_path / "resumed" / "checkpoint-7" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])  # the newest is damaged: resume from step 5
    train_sft(_cfg(steps=12), tmp_path / "resumed", progress=False)
    a = load_file(tmp_path / "straight" / "final" / "model.safetensors")
    b = load_file(tmp_path / "resumed" / "final" / "model.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in a)
    steps = [json.loads(line)["step"] for line in (tmp_path / "resumed" / "metrics.jsonl").read_text().splitlines()]
    assert steps == list(range(1, 13))


def test_a_stop_signal_checkpoints_sft_and_the_rerun_ends_where_an_uninterrupted_run_does(tmp_path, monkeypatch):
    """SFT runs on the shared loop (train/loop.py): SIGTERM stops it at the end of the step, checkpointed."""
    import os
    import signal

    import daca_bench.train.sft as sft

    cfg = _cfg(steps=6, save_every=100)
    train_sft(cfg, tmp_path / "straight", progress=False)
    real, calls = sft.sft_loss, []

    def loss_then_preempted(*args, **kw):  # the real loss; a preemption arrives during step 3
        calls.append(1)
        if len(calls) == 3:
            os.kill(os.getpid(), signal.SIGTERM)
        return real(*args, **kw)

    monkeypatch.setattr(sft, "sft_loss", loss_then_preempted)
    assert train_sft(cfg, tmp_path / "stopped", progress=False) == {"stopped": True, "step": 3}
    assert (tmp_path / "stopped" / "checkpoint-3").is_dir() and not (tmp_path / "stopped" / "summary.json").exists()
    monkeypatch.undo()
    assert train_sft(cfg, tmp_path / "stopped", progress=False)["resumed_from_step"] == 3
    a = load_file(tmp_path / "straight" / "final" / "model.safetensors")
    b = load_file(tmp_path / "stopped" / "final" / "model.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_completion_too_long_for_canvas_is_a_clear_error(tiny):
    with pytest.raises(ValueError, match="raise sampler.gen_length"):
        encode_completions(tiny, ["12345678"], 8)
    ids = encode_completions(tiny, ["42"], 5)
    assert ids[0, 2:].tolist() == [tiny.eos_token_id] * 3


def test_sft_stops_at_the_dev_target_and_a_rerun_does_not_train_on(tmp_path, monkeypatch):
    import daca_bench.train.sft as sft

    calls = []

    def fake_evaluate(adapter, task, cfg, n=None, seed=0, par=None):  # unit-test double: dev accuracy 0.0, then 0.3
        calls.append(task.split)
        return {"accuracy": 0.3 if len(calls) >= 2 else 0.0, "n": len(task.samples), "statuses": {}}

    monkeypatch.setattr(sft, "evaluate", fake_evaluate)
    cfg = _cfg(steps=50, eval_every=4, n_dev=16, target_accuracy=0.25, save_every=100)
    summary = train_sft(cfg, tmp_path, progress=False)
    assert summary["steps"] == 8 and summary["stopped_early"] and summary["dev_accuracy"] == 0.3
    assert calls == ["dev", "dev", "test"]  # the dev set picks the stop; the test split only scores the end
    train_sft(cfg, tmp_path, progress=False)  # resumes from the stop's checkpoint and stays stopped
    steps = [json.loads(line)["step"] for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert steps == list(range(1, 9))


def test_dev_prompts_are_held_out_of_training():
    from daca_bench.train.sft import _split_dev

    train, dev = _split_dev(list(range(100)), 10, "t")
    assert dev == list(range(90, 100)) and not set(train) & set(dev)
    with pytest.raises(ValueError, match="sft.n_dev"):
        _split_dev(list(range(10)), 5, "t")


def test_the_progress_bar_shows_no_dev_accuracy_without_dev_checks(tmp_path, capsys):
    train_sft(_cfg(steps=2, n_train=32, n_eval=4, batch_size=8), tmp_path, progress=True)
    bar = capsys.readouterr().err
    assert "loss=" in bar and "dev=" not in bar  # not dev=nan for a whole run
