import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from daca_bench.config import RLConfig, apply
from daca_bench.train.trainer import PassCounter, train, train_step

from repo_paths import ROOT


def _cfg(**over):
    base = {
        "train": {
            "task": "even_length",
            "steps": 3,
            "prompts_per_step": 4,
            "num_generations": 4,
            "n_eval": 8,
            "lr": 1e-3,
            "save_every": 1,
            "threads": 1,
        },
        "rollout": {"gen_length": 8, "block_length": 4, "steps": 4, "temperature": 1.0},
        "eval": {"gen_length": 8, "block_length": 4, "steps": 4},
    }
    cfg = apply(RLConfig(), base)
    return apply(cfg, over)


def _weights(path):
    return load_file(Path(path) / "final" / "model.safetensors")


def _setup(tiny_cfg, mu=1, dps=False, k=1):
    from daca_bench.models import load_model
    from daca_bench.registry import get_task

    cfg = apply(tiny_cfg, {"train.mu": mu, "dps.enabled": dps, "sml.k": k})
    adapter = load_model(cfg.model)
    task = get_task("even_length", split="train", n=4)
    opt = torch.optim.AdamW(adapter.model.parameters(), lr=cfg.train.lr)
    return cfg, adapter, task, opt


def test_first_inner_step_is_on_policy_with_ratio_exactly_one(monkeypatch):
    cfg, adapter, task, opt = _setup(_cfg(), mu=2, k=2)
    ratios = []
    import daca_bench.train.trainer as tr

    real = tr.LOSSES[cfg.loss.base]

    def spy(logp, old, ref, adv, valid, w, lc):
        ratios.append((logp - old).exp().detach())
        return real(logp, old, ref, adv, valid, w, lc)

    monkeypatch.setitem(tr.LOSSES, cfg.loss.base, spy)
    train_step(adapter, None, cfg, list(task.samples), task, 0, opt, PassCounter(adapter.model))
    assert torch.equal(ratios[0], torch.ones_like(ratios[0]))  # inner 0: same weights, same masks
    assert not torch.equal(ratios[1], torch.ones_like(ratios[1]))  # inner 1: after one update


def test_dps_adds_zero_forward_passes_and_sml_costs_k():
    counts = {}
    for name, dps, k in (("base", False, 1), ("dps", True, 1), ("sml4", False, 4)):
        cfg, adapter, task, opt = _setup(_cfg(), dps=dps, k=k)
        counter = PassCounter(adapter.model)
        train_step(adapter, None, cfg, list(task.samples), task, 0, opt, counter)
        counts[name] = dict(counter.counts)
    assert counts["dps"] == counts["base"]
    assert counts["base"]["rollout"] == 4 and counts["base"]["likelihood"] == 1
    assert counts["sml4"]["likelihood"] == 1 and counts["sml4"]["rollout"] == 4  # the K passes run as one batch


def test_a_step_changes_the_parameters():
    cfg, adapter, task, opt = _setup(_cfg())
    before = {k: v.clone() for k, v in adapter.model.state_dict().items()}
    m = train_step(adapter, None, cfg, list(task.samples), task, 0, opt, PassCounter(adapter.model))
    assert m["zero_std_groups"] < 1 and m["grad_norm"] > 0
    assert any(not torch.equal(before[k], v) for k, v in adapter.model.state_dict().items())


@pytest.mark.parametrize("base", ["grpo", "gspo", "reinforce_pp"])
def test_every_base_trains_with_daca_and_logs(tmp_path, base):
    cfg = _cfg(
        **{"loss.base": base, "dps.enabled": True, "sml.k": 2, "loss.beta": 0.04, "train.mu": 2, "train.steps": 2}
    )
    summary = train(cfg, tmp_path, progress=False)
    rows = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    for key in (
        "reward_mean",
        "zero_std_groups",
        "infra_failures",
        "loss",
        "kl",
        "clip_frac",
        "grad_norm",
        "dps_w_mean",
        "completion_length",
        "seconds_rollout",
        "tokens_per_s",
        "passes_rollout",
    ):
        assert key in rows[0]
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["loss"]["base"] == base and "versions" in config
    assert 0 <= summary["test_accuracy"] <= 1 and (tmp_path / "summary.json").exists()


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_resume_equals_uninterrupted(tmp_path, precision):
    # exact in either precision: both runs take the same batch shapes on the same machine (bf16 forced,
    # so that every CPU checks the bf16 path too)
    over = {"dps.enabled": True, "sml.k": 2, "train.precision": precision}
    train(_cfg(**{"train.steps": 4, **over}), tmp_path / "a", progress=False)
    train(_cfg(**{"train.steps": 2, **over}), tmp_path / "b", progress=False)
    train(_cfg(**{"train.steps": 4, **over}), tmp_path / "b", progress=False)
    a, b = _weights(tmp_path / "a"), _weights(tmp_path / "b")
    assert all(torch.equal(a[k], b[k]) for k in a)
    ra = [json.loads(x)["reward_mean"] for x in (tmp_path / "a" / "metrics.jsonl").read_text().splitlines()]
    rb = [json.loads(x)["reward_mean"] for x in (tmp_path / "b" / "metrics.jsonl").read_text().splitlines()]
    assert ra == rb and len(ra) == 4


def test_lora_trains_with_the_adapter_disabled_base_as_reference(tmp_path):
    cfg = _cfg(
        **{
            "train.lora": True,
            "train.lora_r": 4,
            "train.lora_alpha": 8,
            "loss.beta": 0.04,
            "train.mu": 2,
            "train.steps": 2,
        }
    )
    train(cfg, tmp_path / "a", progress=False)
    rows = [json.loads(x) for x in (tmp_path / "a" / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["kl"] > 0  # the policy has moved away from the base model
    from torch.distributed.checkpoint import FileSystemReader

    keys = FileSystemReader(str(tmp_path / "a" / "checkpoint-2" / "dcp")).read_metadata().state_dict_metadata
    model_keys = [k for k in keys if k.startswith("model.")]
    # the adapter only (the base is train.init's); BERT's output layer is an alias of its frozen embeddings
    assert model_keys and all("lora_" in k or ".cls.predictions.decoder." in k for k in model_keys)
    assert any("lora_" in k for k in model_keys) and not any("base_layer" in k for k in model_keys)
    merged = _weights(tmp_path / "a")  # final/ holds the merged model, loadable without peft
    assert not any("lora" in k for k in merged)
    train(apply(cfg, {"train.steps": 3}), tmp_path / "a", progress=False)  # resumes the adapter
    assert len((tmp_path / "a" / "metrics.jsonl").read_text().splitlines()) == 3


def test_paper_preset_fails_fast_without_gpu(tmp_path):
    from daca_bench.config import load_config

    cfg = load_config(ROOT / "configs/paper/llada_gsm8k.yaml", [], RLConfig)
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(RuntimeError, match="needs a CUDA GPU"):
        train(cfg, tmp_path, progress=False)
    with pytest.raises(RuntimeError, match="neither a local folder nor in the Hugging Face cache"):
        train(apply(cfg, {"train.require_gpu": False}), tmp_path, progress=False)
    assert not (tmp_path / "config.json").exists()  # nothing was started


def test_shipped_rl_presets_load_and_unknown_choices_are_named():
    from daca_bench.config import ConfigError, load_config
    from daca_bench.train.trainer import validate

    for path in [ROOT / "configs/tiny.yaml", *sorted((ROOT / "configs/paper").glob("*.yaml"))]:
        validate(load_config(path, [], RLConfig))
    with pytest.raises(ConfigError, match="did you mean gspo"):
        validate(_cfg(**{"loss.base": "gpso"}))


@pytest.mark.slow
def test_sigterm_checkpoints_and_the_rerun_resumes(tmp_path):
    import signal
    import time

    args = [
        sys.executable,
        "-m",
        "daca_bench",
        "train",
        "--no-progress",
        "--output-dir",
        str(tmp_path),
        "train.task=even_length",
        "train.steps=400",
        "train.save_every=1000",
        "train.threads=1",
        "train.n_eval=4",
        "rollout.block_length=4",
        "rollout.steps=4",
        "eval.block_length=4",
        "eval.steps=4",
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    metrics = tmp_path / "metrics.jsonl"
    deadline = time.time() + 120
    while time.time() < deadline and (not metrics.exists() or len(metrics.read_text().splitlines()) < 3):
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0 and "checkpoint saved" in err
    done = len(metrics.read_text().splitlines())
    assert (tmp_path / f"checkpoint-{done}" / "trainer_state.pt").exists() and not (tmp_path / "summary.json").exists()
    state = torch.load(tmp_path / f"checkpoint-{done}" / "trainer_state.pt", weights_only=False)
    assert state["step"] == done


def test_cells_of_one_seed_share_prompts_noise_and_test_set(tmp_path):
    """Common random numbers: a baseline and a +DACA run of one seed draw the same first rollouts
    (same prompts, same noise, hence the same rewards before any update) and are scored on the same
    test prompts, whatever their seed; another train.seed draws other rollouts but the same test set."""
    runs = {}
    for name, over in {"base": {}, "daca": {"dps.enabled": True, "sml.k": 4}, "seed1": {"train.seed": 1}}.items():
        out = tmp_path / name
        train(_cfg(**{"train.steps": 1, "train.precision": "fp32", **over}), out, progress=False)
        first = json.loads((out / "metrics.jsonl").read_text().splitlines()[0])
        ids = [json.loads(line)["id"] for line in (out / "eval.jsonl").read_text().splitlines()]
        runs[name] = (first["reward_mean"], first["completion_length"], ids)
    assert runs["base"][:2] == runs["daca"][:2]
    assert runs["base"][2] == runs["daca"][2] == runs["seed1"][2] and len(runs["base"][2]) == 8
    assert runs["base"][:2] != runs["seed1"][:2]


# ---- train.precision: both branches of auto, whatever this machine's CPU has ----
BF16_CPU, PLAIN_CPU = frozenset({"sse2", "avx512f", "avx512_bf16"}), frozenset({"sse2", "avx2"})


def test_cpu_flags_are_read_from_the_machine_and_decide_bf16():
    from daca_bench.engine import runtime

    flags = runtime.cpu_flags()
    assert isinstance(flags, frozenset) and runtime.cpu_flags() is flags  # read once
    if Path("/proc/cpuinfo").exists() and os.uname().machine == "x86_64":
        assert "sse2" in flags  # every x86-64 CPU has it: the flags line was parsed
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert runtime.bf16_is_fast(cpu, BF16_CPU) and runtime.bf16_is_fast(cpu, frozenset({"amx_bf16"}))
    assert not runtime.bf16_is_fast(cpu, PLAIN_CPU) and runtime.bf16_is_fast(cuda, PLAIN_CPU)
    assert runtime.bf16_is_fast(cpu) == bool({"amx_bf16", "avx512_bf16"} & flags)


@pytest.mark.parametrize(
    "precision, flags, rollout, update",
    [
        ("auto", BF16_CPU, "bf16", "fp32"),  # bf16 hardware: rollouts in bf16, log-probs and updates in fp32
        ("auto", PLAIN_CPU, "fp32", "fp32"),  # none: everything in fp32
        ("fp32", BF16_CPU, "fp32", "fp32"),
        ("bf16", PLAIN_CPU, "bf16", "bf16"),
    ],
)
def test_each_pass_runs_in_the_precision_config_json_records(tmp_path, monkeypatch, precision, flags, rollout, update):
    import daca_bench.train.trainer as tr
    from daca_bench.engine import runtime

    monkeypatch.setattr(runtime, "cpu_flags", lambda: flags)
    seen = {"rollout": set(), "likelihood": set()}

    def state():
        return (
            "bf16" if torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") == torch.bfloat16 else "fp32"
        )

    def spy(name, real):
        def wrapped(*a, **k):
            if name != "rollout" or isinstance(k.get("seed"), list):  # not the few DPS examples drawn for the plot
                seen[name].add(state())
            return real(*a, **k)

        return wrapped

    monkeypatch.setattr(tr, "sample", spy("rollout", tr.sample))
    monkeypatch.setattr(tr, "sml_logprobs", spy("likelihood", tr.sml_logprobs))
    train(_cfg(**{"train.steps": 1, "train.mu": 2, "train.precision": precision}), tmp_path, progress=False)
    assert seen == {"rollout": {rollout}, "likelihood": {update}}  # mu = 2: old log-probs and updates both seen
    used = json.loads((tmp_path / "config.json").read_text())["precision_used"]
    assert (used["setting"], used["rollout"], used["old_logprobs"], used["update"]) == (
        precision,
        rollout,
        update,
        update,
    )
    assert used["device"] == "cpu" and used["cpu_bf16_flags"] == sorted(flags & {"amx_bf16", "avx512_bf16"})
    assert used["cpu"]


@pytest.mark.parametrize("variant", ["baseline", "+DACA"])
def test_train_variant_runs_what_the_headline_cell_ran(variant, capsys):
    """`train --config configs/tiny.yaml --variant NAME` is the headline's (preset tiny-ablation) cell of NAME, key for key
    (the default, tiny, runs the same cells of baseline and +DACA but for its larger test set)."""
    import argparse

    from daca_bench.experiments.commands.train import run_config
    from daca_bench.experiments.grid.pipeline import tiny_cells
    from daca_bench.experiments.grid.presets import PRESETS

    (cell,) = [
        c
        for c in tiny_cells(PRESETS["tiny-ablation"], {"sudoku": {"folder": "runs/x"}}, seeds=[3])
        if c.axes["variant"] == variant
    ]
    args = argparse.Namespace(
        config="configs/tiny.yaml",
        variant=variant,
        overrides=["train.task=sudoku_tiny", "train.init=runs/x/final", "train.seed=3"],
    )
    assert run_config(args) == cell.config
    line = capsys.readouterr().err
    assert f"--variant {variant} (the tiny-ablation preset's cell): " in line and "train.mu=2" in line
    if variant == "+DACA":
        assert "sml.partition=causal" in line and "dps.score=progress" in line
    # an override on the command line still wins
    args.overrides.append("train.lr=3e-4")
    assert run_config(args).train.lr == 3e-4


def test_an_unknown_variant_names_the_headline_ones(capsys):
    from daca_bench.cli import main

    assert main(["train", "--variant", "+DAC", "--print-config"]) == 2
    assert "choose from baseline, +DPS, +SML, +DACA, +DPS-random" in capsys.readouterr().err


def test_eval_reads_an_rl_checkpoint_as_the_policy_at_that_step(tmp_path):
    """checkpoint-STEP/ holds DCP shards, not a model folder: eval builds the run's policy from its
    config.json and loads the step's weights (LoRA merged); at the last step that is final/'s model."""
    from daca_bench.engine.policy import load_trained

    cfg = _cfg(
        **{"train.lora": True, "train.lora_r": 4, "train.lora_alpha": 8, "train.steps": 2, "train.save_every": 2}
    )
    train(cfg, tmp_path / "run", progress=False)
    at_step = load_trained(str(tmp_path / "run" / "checkpoint-2")).model.state_dict()
    final = _weights(tmp_path / "run")
    assert at_step.keys() >= final.keys()
    assert all(torch.allclose(at_step[k], final[k], atol=1e-6) for k in final)
    from daca_bench.cli import main

    out = tmp_path / "eval"
    assert (
        main(
            [
                "eval",
                "--model",
                str(tmp_path / "run" / "checkpoint-2"),
                "--task",
                "even_length",
                "--n",
                "4",
                "--output-dir",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
