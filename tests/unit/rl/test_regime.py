"""The regime DACA is tested in: several inner updates whose ratio starts at exactly 1 (dropout
included), a dev split disjoint from the test split for choosing readings, and the rule that
picks them without the test set."""

import json

import pytest

from daca_bench.config import RLConfig, apply
from daca_bench.experiments.analysis.cellstore import cells as committed_cells
from daca_bench.experiments.analysis.cellstore import is_run
from daca_bench.experiments.grid import readings
from daca_bench.registry import get_task

from repo_paths import ROOT


def _cfg(**over):
    base = {
        "train": {
            "task": "even_length",
            "steps": 1,
            "prompts_per_step": 4,
            "num_generations": 4,
            "n_eval": 4,
            "lr": 1e-3,
            "save_every": 1,
            "threads": 1,
            "mu": 3,
        },
        "rollout": {"gen_length": 8, "block_length": 4, "steps": 4, "temperature": 1.0},
        "eval": {"gen_length": 8, "block_length": 4, "steps": 4},
        "sml": {"p_mask_prompt": 0.15},
        "loss": {"beta": 0.04},
    }
    return apply(apply(RLConfig(), base), over)


def _inner_log_ratios(monkeypatch, tmp_path, cfg):
    import functools

    import peft

    import daca_bench.train.trainer as tr

    # LoRA's B starts at 0, which would hide its dropout: start from a random adapter instead
    monkeypatch.setattr(peft, "LoraConfig", functools.partial(peft.LoraConfig, init_lora_weights=False))

    seen, real = [], tr.LOSSES[cfg.loss.base]

    def spy(logp, old, ref, adv, valid, w, lc):
        seen.append((logp - old).detach()[valid].abs().max().item())
        return real(logp, old, ref, adv, valid, w, lc)

    monkeypatch.setitem(tr.LOSSES, cfg.loss.base, spy)
    tr.train(cfg, tmp_path, progress=False)
    return seen


LORA = {"train.lora": True, "train.lora_r": 4, "train.lora_alpha": 8, "train.lora_dropout": 0.3}


def test_with_lora_dropout_every_inner_ratio_is_exactly_one_until_the_policy_moves(monkeypatch, tmp_path):
    # lr 0: the policy never moves, so any ratio other than 1 would come from the passes disagreeing
    still = _inner_log_ratios(monkeypatch, tmp_path / "off", _cfg(**LORA, **{"train.lr": 0.0}))
    assert still == [0.0, 0.0, 0.0]
    moving = _inner_log_ratios(monkeypatch, tmp_path / "moving", _cfg(**LORA))
    assert moving[0] == 0.0 and moving[1] > 0  # the first inner step starts at ratio 1; later ones act


def test_dropout_left_on_makes_the_passes_disagree(monkeypatch, tmp_path):
    """The control for the test above: with dropout kept on, old and current passes differ even at lr 0."""
    noisy = _inner_log_ratios(monkeypatch, tmp_path, _cfg(**LORA, **{"train.lr": 0.0, "train.disable_dropout": False}))
    assert noisy[0] == 0.0 and max(noisy[1:]) > 1e-4


def test_a_run_reports_its_mean_clip_fraction_and_kl(tmp_path):
    from daca_bench.train.trainer import train

    train(_cfg(**{"train.steps": 2, "loss.epsilon": 0.01, "train.lr": 3e-3}), tmp_path, progress=False)
    s = json.loads((tmp_path / "summary.json").read_text())
    assert s["clip_frac_mean"] > 0 and s["kl_mean"] > 0 and s["eval_split"] == "test"


@pytest.mark.parametrize("task,key", [("sudoku_tiny", "solution"), ("countdown_tiny", None)])
def test_dev_split_shares_no_puzzle_with_test(task, key):
    dev, test = (get_task(task, split=s, n=256, seed=0) for s in ("dev", "test"))
    assert len(dev.samples) == 256
    if key:  # sudoku: split by solution grid
        grid = lambda s: s.metadata.get(key) or s.target  # noqa: E731
        assert not {grid(s) for s in dev.samples} & {grid(s) for s in test.samples}
    assert not {s.prompt for s in dev.samples} & {s.prompt for s in test.samples}
    assert not {s.prompt for s in dev.samples} & {s.prompt for s in get_task(task, split="train", n=2048).samples}


def test_the_rule_picks_by_dev_accuracy_and_builds_daca_and_the_control():
    acc = {
        ("baseline", 5e-5): 0.20,
        ("baseline", 1e-4): 0.22,
        ("+DPS:progress", 5e-5): 0.21,
        ("+DPS:surprise", 1e-4): 0.25,
        ("+DPS:random", 1e-4): 0.30,
        ("+SML:random", 5e-5): 0.19,
        ("+SML:causal", 5e-5): 0.23,
        ("+SML:strided", 1e-4): 0.23,
    }
    out = readings.pick(acc)["picks"]
    assert out["baseline"]["train.lr"] == 1e-4
    assert out["+DPS"]["reading"] == "+DPS:surprise"  # the random control is never picked
    assert out["+SML"]["reading"] == "+SML:strided"  # a tie goes to the one listed first
    assert out["+DACA"] == {
        "reading": "+DPS:surprise with +SML:strided",
        "train.lr": 1e-4,
        "dps.score": "surprise",
        "dps.norm": "rank",
        "sml.partition": "strided",
        "sml.k": 4,
    }
    assert out["+DPS-random"]["dps.score"] == "random" and out["+DPS-random"]["train.lr"] == 1e-4


def test_the_sweep_never_uses_the_confirmatory_seeds_or_the_test_split():
    from daca_bench.experiments.grid.pipeline import tiny_cells
    from daca_bench.experiments.grid.presets import PRESETS

    sweep, confirm = PRESETS["tiny-readings"], PRESETS["tiny-confirm"]
    assert not set(sweep.seeds) & set(confirm.seeds)
    sft = {label: {"folder": "runs/x"} for label in sweep.families}
    cells = tiny_cells(sweep, sft)
    assert {c.config.train.eval_split for c in cells} == {"dev"}
    assert {c.axes["reading"] for c in cells} == set(readings.READINGS)
    assert len(cells) == len(readings.READINGS) * len(sweep.lrs) * len(sweep.seeds) * len(sweep.families)
    for c in tiny_cells(confirm, {label: {"folder": "runs/x"} for label in confirm.families}):
        assert c.config.train.eval_split == "test" and c.config.train.mu >= 2 and c.config.sml.p_mask_prompt > 0


# ---- what was committed: the sweep, its picks, and the confirmatory default ---------------------
def _committed(name):
    folder = ROOT / "results" / name
    if not is_run(folder):
        pytest.skip(f"results/{name} is not in this checkout")
    return folder


def test_the_confirmatory_presets_carry_the_committed_picks():
    from daca_bench.experiments.grid.presets import PICKS, PRESETS

    picks = json.loads((_committed("tiny-readings") / "picks.json").read_text())
    assert picks["picks"] == PICKS == PRESETS["tiny"].picks == PRESETS["tiny-confirm"].picks
    # and they follow from the sweep's cells by the rule
    assert readings.pick(readings.sweep_accuracy(ROOT / "results/tiny-readings/cells"))["picks"] == PICKS


def test_the_committed_sweep_has_the_control_and_causal_on_selection_seeds_and_dev():
    cells = [c.json("config.json") for c in committed_cells(_committed("tiny-readings") / "cells")]
    assert {c["train"]["eval_split"] for c in cells} == {"dev"}
    assert {c["train"]["seed"] for c in cells} & set(range(8)) == set()
    assert any(c["dps"]["enabled"] and c["dps"]["score"] == "random" for c in cells)
    assert any(c["sml"]["partition"] == "causal" and c["sml"]["k"] > 1 for c in cells)


def test_the_committed_default_ran_in_the_regime():
    cells = [c for c in committed_cells(_committed("tiny-ablation") / "cells") if c.name.startswith("base=")]
    assert len(cells) >= 40
    clipped = 0
    for cell in cells:
        cfg = cell.json("config.json")
        assert cfg["train"]["mu"] >= 2 and cfg["sml"]["p_mask_prompt"] > 0 and cfg["train"]["eval_split"] == "test"
        rows = cell.rows("metrics.jsonl")
        clipped += any(r["clip_frac"] > 0 for r in rows)
        assert max(r["kl"] for r in rows) > 0  # the ratio and the KL term acted
    assert clipped > 0


@pytest.mark.parametrize("over", [{"sml.k": 1}, {"sml.k": 2, "sml.partition": "causal"}])
def test_one_old_and_reference_pass_when_every_inner_iteration_sees_the_same_canvases(monkeypatch, tmp_path, over):
    """No prompt masking and iteration-free strata: the shared passes give the run the separate
    passes give (same metrics, same weights), with fewer forward passes."""
    from daca_bench.train import trainer as tr

    cfg = _cfg(**{"sml.p_mask_prompt": 0.0, "train.steps": 2, **over})
    assert tr.same_masks(cfg) and not tr.same_masks(_cfg(**over))  # prompt masking draws per iteration
    assert not tr.same_masks(apply(cfg, {"sml.k": 2, "sml.partition": "random"}))
    tr.train(cfg, tmp_path / "shared", progress=False)
    monkeypatch.setattr(tr, "same_masks", lambda c: False)
    tr.train(cfg, tmp_path / "separate", progress=False)
    rows = {
        name: [json.loads(x) for x in (tmp_path / name / "metrics.jsonl").read_text().splitlines() if x.strip()]
        for name in ("shared", "separate")
    }
    for a, b in zip(rows["shared"], rows["separate"]):
        for key in ("loss", "kl", "clip_frac", "reward_mean"):
            if key in a:
                assert a[key] == pytest.approx(b[key], rel=1e-4, abs=1e-6), key
        passes = lambda r: sum(v for k, v in r.items() if k.startswith("passes_"))  # noqa: E731
        assert passes(a) < passes(b)
