"""Interop with the HF stack: Task.to_hf_dataset, reward functions on its columns, TRL's GRPOTrainer."""

import importlib.util
import warnings

import pytest
import torch

from daca_bench.registry import get_task
from daca_bench.rewards.verify import reward_function

from repo_paths import ROOT


@pytest.mark.parametrize("name", ["arithmetic", "countdown_tiny", "sudoku_tiny", "json_tiny", "json_schema"])
def test_to_hf_dataset_columns_score_the_gold_completion(name):
    task = get_task(name, n=3)
    ds = task.to_hf_dataset()
    assert ds.column_names[:2] == ["prompt", "id"] and len(ds) == 3
    if "schema" in ds.column_names:
        assert isinstance(ds[0]["schema"], str)  # a dict schema travels as its JSON text
    columns = {c: list(ds[c]) for c in ds.column_names if c != "prompt"}  # what TRL passes
    f = reward_function(name)
    assert f(prompts=list(ds["prompt"]), completions=[s.target for s in task.samples], **columns) == [1.0] * 3
    assert f(prompts=list(ds["prompt"]), completions=[""] * 3, **columns) == [0.0] * 3


def test_gsm8k_scores_from_its_gold_answer_column_alone():
    f = reward_function("gsm8k")
    assert f(prompts=["p", "p"], completions=["<answer>72</answer>", "71"], answer=["72", "72"]) == [1.0, 0.0]


def test_missing_column_warns_once_and_names_it():
    f = reward_function("gsm8k")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert f(prompts=["p", "q"], completions=["72", "3"], other=[1, 2]) == [None, None]
        f(prompts=["p"], completions=["72"], other=[1])
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1 and "lack the column 'answer'" in messages[0] and "'question'" in messages[0]


@pytest.mark.slow
def test_trl_grpo_example_trains_two_steps_on_daca_bench_rewards(tmp_path):
    pytest.importorskip("trl")
    spec = importlib.util.spec_from_file_location("trl_grpo", ROOT / "examples" / "trl_grpo.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    trainer = example.main(["--steps", "2", "--output", str(tmp_path)])
    logs = [h for h in trainer.state.log_history if "reward" in h]
    assert trainer.state.global_step == 2 and len(logs) == 2
    assert all("rewards/arithmetic_reward/mean" in h for h in logs)  # our verifier scored every group


def test_plugging_in_example_runs():
    text = (ROOT / "docs" / "plugging-in.md").read_text()
    code = text.split("```python\n", 1)[1].split("```", 1)[0]
    scope = {}
    exec(compile(code, "docs/plugging-in.md", "exec"), scope)
    assert scope["w"].shape == scope["logp"].shape == scope["batch"].completion_ids.shape
    assert scope["loss"].requires_grad and scope["loss"].isfinite()
    valid_w = scope["w"][scope["valid"]]
    assert not torch.allclose(valid_w, torch.ones_like(valid_w))  # DPS applied: not the plain step
    assert valid_w.min() < 0.9 and valid_w.max() > 1.1


def test_evaluate_metric_scores_with_a_task_verifier_offline(monkeypatch):
    import json

    evaluate = pytest.importorskip("evaluate")
    from daca_bench.metrics import VERIFY_METRIC

    monkeypatch.setenv("HF_EVALUATE_OFFLINE", "1")
    metric = evaluate.load(VERIFY_METRIC)
    task = get_task("countdown_tiny", n=2)
    refs = [json.dumps({"numbers": s.metadata["numbers"], "target": s.metadata["target"]}) for s in task.samples]
    out = metric.compute(
        predictions=[task.samples[0].target, "1+1", "2"], references=refs + [json.dumps({})], task="countdown_tiny"
    )
    assert out["accuracy"] == 0.5 and out["scored"] == 2
    assert (out["correct"], out["wrong"], out["bad_input"], out["infra_error"]) == (1, 1, 1, 0)
