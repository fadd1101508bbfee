"""Paper scale on CPU: chunked log-probs against the float32 reference, activation-memory knobs,
the native LLaDA class at a tiny config end to end (and the trust_remote_code route, through modeling
files generated from the native classes: daca_bench.testing.remote), d1's loss aggregation and
optimiser knobs."""

import math
from pathlib import Path

import pytest
import torch

from daca_bench.rl.likelihood import logsumexp_max, sml_logprobs, target_logprobs
from daca_bench.rl.sampler import pad_prompts

from repo_paths import ROOT


def _reference(logits, target):
    return torch.log_softmax(logits.float(), -1).gather(-1, target[..., None]).squeeze(-1)


@pytest.mark.parametrize("chunk", [1, 3, 7, 16, 0])
def test_chunked_target_logprobs_match_the_float32_log_softmax(chunk):
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(5, 7, 300, generator=gen) * 4
    target = torch.randint(0, 300, (5, 7), generator=gen)
    assert torch.allclose(target_logprobs(logits, target, chunk), _reference(logits, target), atol=1e-5)
    lse, top = logsumexp_max(logits, chunk)
    assert torch.allclose(lse, torch.logsumexp(logits, -1), atol=1e-5)
    assert torch.equal(top, logits.amax(-1))


def test_chunked_gradients_equal_the_reference_and_bf16_stays_close():
    gen = torch.Generator().manual_seed(1)
    base = torch.randn(4, 6, 200, generator=gen) * 3
    target = torch.randint(0, 200, (4, 6), generator=gen)
    a, b = base.clone().requires_grad_(), base.clone().requires_grad_()
    target_logprobs(a, target, 5).sum().backward()
    _reference(b, target).sum().backward()
    assert torch.allclose(a.grad, b.grad, atol=1e-6)
    half = target_logprobs(base.bfloat16(), target, 5)
    assert half.dtype == torch.float32
    assert torch.allclose(half, _reference(base, target), atol=0.1)  # bf16 rounding of the logits only
    assert not torch.allclose(half, _reference(base, target) + 0.5, atol=0.1)


def test_sml_on_the_tiny_model_is_unchanged_by_the_logit_chunk(tiny):
    p, m = pad_prompts(tiny, ["12+5=", "3-1+20=", "7="])
    comp = torch.randint(4, 60, (3, 6), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        whole = sml_logprobs(tiny, p, m, comp, k=2, logit_chunk=0)
        for c in (1, 5, 1024):
            assert torch.allclose(sml_logprobs(tiny, p, m, comp, k=2, logit_chunk=c), whole, atol=1e-5)


def test_rows_that_fit_grow_with_free_memory_and_checkpointing():
    from daca_bench.engine.memory import rows_that_fit

    llada = dict(seq_len=456, vocab=126_464, hidden=4096, layers=32, dtype_bytes=2)
    plain = rows_that_fit(80 * 2**30, checkpointing=False, **llada)
    ckpt = rows_that_fit(80 * 2**30, checkpointing=True, **llada)
    assert 1 <= plain < ckpt
    assert rows_that_fit(160 * 2**30, checkpointing=True, **llada) >= 2 * ckpt - 1
    assert rows_that_fit(1, checkpointing=True, **llada) == 1


def test_sml_chunk_is_unchanged_on_cpu(tiny):
    from daca_bench.config import RLConfig, apply
    from daca_bench.engine.memory import sml_chunk

    assert sml_chunk(tiny, RLConfig(), 40) is None
    assert sml_chunk(tiny, apply(RLConfig(), {"sml.chunk": 6}), 40) == 6


def test_out_of_memory_in_a_step_is_one_line_naming_the_knobs(tmp_path, monkeypatch):
    from daca_bench.config import ConfigError, RLConfig, apply
    from daca_bench.train import trainer

    def boom(*a, **k):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB\nmore detail")

    monkeypatch.setattr(trainer, "train_step", boom)
    cfg = apply(
        RLConfig(),
        {"train": {"task": "even_length", "steps": 1, "n_eval": 4, "threads": 1, "gradient_checkpointing": True}},
    )
    with pytest.raises(ConfigError) as err:
        trainer.train(cfg, tmp_path, progress=False)
    msg = str(err.value)
    assert "\n" not in msg and "20.00 GiB" in msg
    assert all(k in msg for k in ("sml.chunk", "train.grad_accum", "train.gradient_checkpointing"))


def test_gradient_checkpointing_gives_the_same_gradients(tiny):
    import copy

    from daca_bench.engine.memory import enable_gradient_checkpointing

    p, m = pad_prompts(tiny, ["12+5=", "7="])
    comp = torch.randint(4, 60, (2, 6), generator=torch.Generator().manual_seed(3))
    grads = []
    for ckpt in (False, True):
        model = copy.deepcopy(tiny.model).train()
        if ckpt:
            enable_gradient_checkpointing(model)
        adapter = type(tiny)(model, tiny.tokenizer, tiny.mask_token_id, tiny.eos_token_id, tiny.pad_token_id)
        sml_logprobs(adapter, p, m, comp, k=2).sum().backward()
        grads.append(torch.cat([q.grad.flatten() for q in model.parameters() if q.grad is not None]))
    assert model.is_gradient_checkpointing
    assert torch.allclose(grads[0], grads[1], atol=1e-5)


# ---- LLaDA at a tiny config: the native class, and the remote-code route LLaDA's hub folder takes ----
@pytest.fixture(scope="module")
def llada_dir(tmp_path_factory):
    from daca_bench.testing import write_paper_folder

    return write_paper_folder("llada", tmp_path_factory.mktemp("llada") / "model")


@pytest.fixture(scope="module")
def llada(llada_dir):
    from daca_bench.models import load_pretrained

    torch.set_num_threads(2)
    return load_pretrained(str(llada_dir))


@pytest.fixture(scope="module")
def remote_dir(tmp_path_factory):
    """LLaDA's hub layout with modeling files beside the weights (generated from the native class)."""
    from daca_bench.testing import write_remote_folder

    return write_remote_folder("llada", tmp_path_factory.mktemp("remote") / "model")


@pytest.mark.parametrize("family", ["llada", "dream"])
def test_the_remote_code_route_loads_the_folders_code_patched(family, tmp_path):
    """trust_remote_code loads the folder's own modeling files (patched in memory), with the mask id and
    Dream's shift and square mask; the same folder without the flag loads the native class; both agree."""
    import sys

    from daca_bench.archs import NATIVE
    from daca_bench.models import load_pretrained
    from daca_bench.testing import write_remote_folder

    folder = write_remote_folder(family, tmp_path / family)
    remote, native = load_pretrained(str(folder), trust_remote_code=True), load_pretrained(str(folder))
    assert type(remote.model).__module__.startswith("transformers_modules")
    assert sys.modules[type(remote.model).__module__]._daca_patched and type(native.model) is NATIVE[family]
    assert remote.mask_token_id == remote.model.config.mask_token_id == native.mask_token_id
    assert remote.shift_logits is remote.square_mask is (family == "dream") and not native.square_mask
    ids = torch.tensor([[remote.pad_token_id] * 2 + remote.encode(["12+5="])[0] + [remote.mask_token_id] * 3])
    mask = (torch.arange(ids.shape[1]) >= 2).long()[None]
    with torch.no_grad():
        assert torch.allclose(remote.logits(ids, mask), native.logits(ids, mask), atol=1e-6)


@torch.no_grad()
def test_llada_is_bidirectional_and_left_padding_is_invisible(llada):
    ids = torch.tensor([[10, 11, 12, 13]])
    base = llada.logits(ids, torch.ones_like(ids))
    later = ids.clone()
    later[0, 3] = 20  # a later token changes an earlier position's prediction: no causal mask
    assert not torch.allclose(llada.logits(later, torch.ones_like(ids))[0, 0], base[0, 0])
    padded = torch.tensor([[llada.pad_token_id] * 3 + [10, 11, 12, 13]])
    mask = (padded != llada.pad_token_id).long()
    assert torch.allclose(llada.logits(padded, mask)[:, 3:], base, atol=1e-5)


def test_llada_samples_with_a_record_that_replay_confirms(llada):
    from daca_bench.config import SamplerConfig
    from daca_bench.rl.sampler import replay_commit_logp, sample

    cfg = SamplerConfig(gen_length=8, block_length=4, steps=8, temperature=0.9)
    batch = sample(llada, ["12+5=", "3-1+20="], cfg, seed=0)
    assert batch.completion_ids.shape == (2, 8) and batch.forward_passes == 8
    assert torch.isfinite(batch.trajectory.commit_logp).all()
    assert torch.allclose(replay_commit_logp(llada, batch), batch.trajectory.commit_logp, atol=1e-4)


def test_llada_estimators_and_bf16_against_float32(llada):
    import copy

    from daca_bench.rl.likelihood import elbo_logprobs

    p, m = pad_prompts(llada, ["12+5=", "7="])
    comp = torch.randint(4, 90, (2, 8), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        k1 = sml_logprobs(llada, p, m, comp, k=1, logit_chunk=3)
        hidden = torch.full_like(comp, llada.mask_token_id)
        ref = _reference(
            llada.logits(torch.cat([p, hidden], 1), torch.cat([m, torch.ones_like(comp)], 1))[:, p.shape[1] :], comp
        )
        assert torch.allclose(k1, ref, atol=1e-5)
        k4 = sml_logprobs(llada, p, m, comp, k=4)
        assert k4.shape == (2, 8) and not torch.allclose(k4, k1, atol=1e-4)
        assert torch.isfinite(elbo_logprobs(llada, p, m, comp, draws=3)).all()
        half = type(llada)(
            copy.deepcopy(llada.model).bfloat16(),
            llada.tokenizer,
            llada.mask_token_id,
            llada.eos_token_id,
            llada.pad_token_id,
        )
        assert torch.allclose(sml_logprobs(half, p, m, comp, k=4, logit_chunk=5), k4, atol=0.05)


@pytest.mark.parametrize("remote", [False, True], ids=["native", "remote-code"])
def test_llada_one_lora_step_with_checkpointing(remote, llada_dir, remote_dir, tmp_path):
    import json

    from daca_bench.config import RLConfig, apply
    from daca_bench.engine.memory import enable_gradient_checkpointing
    from daca_bench.engine.policy import load_policy
    from daca_bench.train.trainer import train

    cfg = apply(
        RLConfig(),
        {
            "model": {"name": str(remote_dir if remote else llada_dir), "trust_remote_code": remote},
            "train": {
                "task": "even_length",
                "steps": 1,
                "prompts_per_step": 2,
                "num_generations": 2,
                "n_eval": 2,
                "lr": 1e-2,
                "threads": 1,
                "lora": True,
                "lora_r": 4,
                "lora_alpha": 8,
                "lora_dropout": 0.05,
                "gradient_checkpointing": True,
            },
            "rollout": {"gen_length": 4, "block_length": 4, "steps": 4, "temperature": 1.0},
            "eval": {"gen_length": 4, "block_length": 4, "steps": 4},
            "sml.k": 2,
            "dps.enabled": True,
        },
    )
    summary = train(cfg, tmp_path, progress=False)
    # the ledger counts canvases: K=2 strata x N=4 rows in the update, 4 rows x 4 denoising steps in the rollout
    assert summary["steps"] == 1 and summary["ledger"]["phases"]["likelihood"]["passes"] == 8
    assert summary["ledger"]["phases"]["likelihood"]["flops"] > 0 and summary["ledger"]["completions"] == 4
    row = json.loads((tmp_path / "metrics.jsonl").read_text().splitlines()[0])
    assert math.isfinite(row["loss"]) and row["passes_rollout"] == 16
    from torch.distributed.checkpoint import FileSystemReader

    from daca_bench.engine.checkpoint import checkpoints

    meta = FileSystemReader(str(checkpoints(tmp_path)[0] / "dcp")).read_metadata().state_dict_metadata
    ranks = {m.size[0] for k, m in meta.items() if k.endswith("lora_A.default.weight")}
    assert ranks == {4}  # the LoRA adapter of rank r=4 is what the (DCP) checkpoint holds
    # the random policy's rewards may tie within groups (zero advantage): check the gradient path directly
    policy = load_policy(cfg, None)
    enable_gradient_checkpointing(policy.model)
    assert type(policy.model.get_base_model()).__module__.startswith("transformers_modules") is remote
    policy.model.train()
    p, m = pad_prompts(policy, ["12+5=", "7="])
    sml_logprobs(policy, p, m, torch.randint(4, 90, (2, 4)), k=2).sum().backward()
    lora_b = [q.grad for n, q in policy.model.named_parameters() if "lora_B" in n]
    assert lora_b and all(g is not None for g in lora_b) and any(g.abs().sum() > 0 for g in lora_b)


def test_likelihood_bias_command_on_llada_through_remote_code(tmp_path, capsys):
    from daca_bench.cli import main
    from daca_bench.testing import write_remote_folder

    folder = write_remote_folder("llada", tmp_path / "model", compact=True)  # a ~100-row vocabulary: quicker
    rc = main(
        [
            "likelihood-bias",
            "--model",
            str(folder),
            "--trust-remote-code",
            "--task",
            "arithmetic",
            "--n",
            "3",
            "--draws",
            "2",
            "--gen-length",
            "4",
            "--steps",
            "4",
            "--no-progress",
        ]
    )
    assert rc == 0 and "SML K=4" in capsys.readouterr().out


def test_gpu_check_runs_at_toy_size_on_cpu(tmp_path):
    import importlib
    import json

    gpu_check = importlib.import_module("benchmarks.gpu.gpu_check")
    report = gpu_check.main(["--toy", "--steps", "1", "--json", str(tmp_path / "toy.json")])
    assert json.loads((tmp_path / "toy.json").read_text()) == report
    for name in ("baseline", "daca_k4"):
        run = report[name]
        assert run["peak_memory_gib"] > 0 and run["seconds_total"] > 0 and run["rollout_tokens_per_s"] > 0
        assert set(run["seconds"]) == set(gpu_check.PHASES) and run["mfu"] is None
    assert report["daca_k4"]["forward_passes"]["likelihood"] >= 1 and report["eval"]["n"] == 4
    assert report["model_parameters"] > 0 and report["shape"]["toy"]


# ---- faithful to d1 where the presets say so ----
def test_loss_types_aggregate_token_losses_as_named():
    from daca_bench.config import LossConfig
    from daca_bench.rl.losses import loss_grpo

    logp = torch.zeros(2, 4)
    valid = torch.tensor([[1, 1, 1, 1], [1, 0, 0, 0]], dtype=torch.bool)
    adv = torch.tensor([1.0, -2.0])
    w = torch.ones(2, 4)
    got = {
        t: loss_grpo(logp, logp, None, adv, valid, w, LossConfig(loss_type=t))[0].item()
        for t in ("grpo", "bnpo", "dr_grpo")
    }
    # token losses: -1 on four tokens of row 0, +2 on one token of row 1
    assert got["grpo"] == pytest.approx((-1 + 2) / 2)
    assert got["bnpo"] == pytest.approx((-4 + 2) / 5)
    assert got["dr_grpo"] == pytest.approx((-4 + 2) / 8)


def test_paper_presets_carry_d1s_values():

    from daca_bench.config import RLConfig, load_config

    root = ROOT
    # d1's test sets; gsm8k and math500 are posed under protocol d1 (the retired gsm8k_d1 / math500_d1)
    n_eval = {"gsm8k": 1319, "math500": 500, "countdown_d1": 256, "sudoku_d1": 256}
    posed = set()
    for path in sorted((root / "configs/paper").glob("llada_*.yaml")):
        cfg = load_config(path, [], RLConfig)
        t = cfg.train
        assert (t.adam_beta1, t.adam_beta2, t.weight_decay, t.lora_dropout) == (0.9, 0.99, 0.1, 0.05), path
        assert t.gradient_checkpointing and t.chat_template and cfg.loss.loss_type == "bnpo", path
        assert t.n_eval == n_eval.get(t.task, t.n_eval) and t.max_prompt_length == 200
        assert t.task not in ("gsm8k", "math500") or t.protocol == "d1", path
        posed.add(t.task)
    assert posed >= set(n_eval)
    assert RLConfig().loss.loss_type == "grpo" and not RLConfig().train.chat_template  # tiny preset unchanged


def test_chat_template_without_one_is_a_clear_error(tmp_path):
    from daca_bench.config import RLConfig, apply
    from daca_bench.train.trainer import train

    cfg = apply(
        RLConfig(), {"train": {"task": "even_length", "steps": 1, "n_eval": 2, "threads": 1, "chat_template": True}}
    )
    with pytest.raises(ValueError, match="train.chat_template=false"):
        train(cfg, tmp_path, progress=False)


def test_resuming_a_full_fine_tune_keeps_remote_code_and_dtype(remote_dir, tmp_path):
    from daca_bench.config import RLConfig, apply
    from daca_bench.engine.checkpoint import find_checkpoint
    from daca_bench.engine.policy import load_policy
    from daca_bench.train.trainer import train

    cfg = apply(
        RLConfig(),
        {
            "model": {"name": str(remote_dir), "trust_remote_code": True, "dtype": "bfloat16"},
            "train": {
                "task": "even_length",
                "steps": 1,
                "prompts_per_step": 2,
                "num_generations": 2,
                "n_eval": 2,
                "threads": 1,
            },
            "rollout": {"gen_length": 4, "block_length": 4, "steps": 4},
            "eval": {"gen_length": 4, "block_length": 4, "steps": 4},
            "loss.loss_type": "bnpo",
        },
    )
    train(cfg, tmp_path, progress=False)
    checkpoint = find_checkpoint(tmp_path)
    assert (Path(checkpoint) / "dcp").is_dir()  # weights (fp32 master) in DCP; the code comes from model.name
    resumed = load_policy(cfg, checkpoint)
    assert next(resumed.model.parameters()).dtype == torch.bfloat16
    assert type(resumed.model).__module__.startswith("transformers_modules")
    assert type(resumed.model).__name__ == "LLaDAModelLM"
    assert train(apply(cfg, {"train.steps": 2}), tmp_path, progress=False)["steps"] == 2


def test_lora_s_initial_adapter_is_drawn_from_train_seed_alone():
    """LoRA's A matrices come from train.seed whatever the RNG did before (the base's load path, the process
    count: SDAR at 2 processes drew other ones, issue 57), and the RNG stream after is the one a full
    fine-tune's load leaves."""
    from daca_bench.config import RLConfig, apply
    from daca_bench.engine.policy import load_policy

    def load(seed: int, before: int, lora: bool = True):
        torch.manual_seed(before)
        cfg = apply(RLConfig(), {"train": {"seed": seed, "lora": lora, "lora_r": 4, "lora_alpha": 8}})
        policy = load_policy(cfg, None)
        after = torch.rand(3)
        return {n: p.detach().clone() for n, p in policy.model.named_parameters() if "lora_A" in n}, after

    a, after = load(0, before=1)
    b, _ = load(0, before=2)
    c, _ = load(1, before=1)
    assert a and all(torch.equal(a[k], b[k]) for k in a)
    assert not all(torch.equal(a[k], c[k]) for k in a)  # another seed, another adapter
    assert torch.equal(after, load(0, before=1, lora=False)[1])  # LoRA drew nothing from the caller's stream
