"""Issue 48: a budget's arm read from a longer run. With a constant learning rate, a run's evaluation
at step N (train.eval_every) is the N-step run's final evaluation, prompt for prompt, and evaluating
in the middle changes nothing the training does after it: so one 80-step cell also gives the 32-step
arm of its variant, and its ledger up to step N is the N-step run's ledger."""

import json

import pytest

from daca_bench.config import apply
from daca_bench.eval.evaluate import read_eval_records
from daca_bench.experiments.grid.cost import arms
from daca_bench.rl.ledger import run_ledger
from daca_bench.train.trainer import train

TIMING = ("seconds_", "tokens_per_s")


def _training(path):
    rows = [json.loads(x) for x in (path / "metrics.jsonl").read_text().splitlines()]
    return [
        {
            k: v
            for k, v in r.items()
            if not k.startswith(TIMING) and not k.endswith("_eval") and k not in ("test_accuracy", "eval_prompts")
        }
        for r in rows
    ]


@pytest.mark.slow
def test_an_intermediate_evaluation_is_the_shorter_runs_final_one(tmp_path):
    cfg = next(c for _, v, c in arms("tiny", None) if v == "+DACA")
    cfg = apply(cfg, {"train.n_eval": 16, "train.threads": 1, "train.save_every": 100})
    short, long = tmp_path / "short", tmp_path / "long"
    train(apply(cfg, {"train.steps": 2}), short, progress=False)
    train(apply(cfg, {"train.steps": 4, "train.eval_every": 2}), long, progress=False)
    assert read_eval_records(long / "eval-step2.jsonl") == read_eval_records(short / "eval.jsonl")
    assert _training(long)[:2] == _training(short)
    # the longer run's training is the same with or without the evaluation in the middle
    plain = tmp_path / "plain"
    train(apply(cfg, {"train.steps": 4}), plain, progress=False)
    assert _training(plain) == _training(long)
    assert read_eval_records(plain / "eval.jsonl") == read_eval_records(long / "eval.jsonl")
    # the ledger up to step 2 is the 2-step run's (FLOPs, passes, samples; seconds are the clock's)
    a = run_ledger(long / "metrics.jsonl", upto=2)
    b = json.loads((short / "summary.json").read_text())["ledger"]
    assert a["flops_train"] == b["flops_train"] and a["completions"] == b["completions"]
    assert a["reward_calls"] == b["reward_calls"] and a["steps"] == 2
    for p in ("rollout", "likelihood_old", "likelihood", "eval"):
        assert (a["phases"][p]["flops"], a["phases"][p]["passes"]) == (
            b["phases"][p]["flops"],
            b["phases"][p]["passes"],
        )
