"""The policy RL trains and its reference: loaded from train.init (an SFT run) or model.name, resumed from
a checkpoint, wrapped with LoRA (peft) and, as d1 loads it, on a 4-bit NF4 base; dropout off.

    adapter = load_policy(cfg, ckpt)   # ckpt None: the policy before RL
    adapter = start_policy(cfg, ckpt, par, device, prepare)   # the same under the engine: loaded and wrapped
    reference = start_reference(cfg, par, device)             # a full fine-tune's frozen reference, sharded too

Under the engine a full fine-tune from a save_pretrained folder starts sharded (engine/shards.py): built on the meta
device, each rank reading only its shards; otherwise the policy is loaded whole, moved to the device and wrapped.
"""

from __future__ import annotations

import json
from dataclasses import fields, replace
from pathlib import Path

import torch

from ..adapter import ModelAdapter
from ..config import ConfigError, RLConfig, apply
from ..models import load_checkpoint, load_model, load_pretrained
from .checkpoint import is_sharded, load_sharded
from .parallel import Parallel
from .shards import empty_source, start_sharded


def disable_dropout(model) -> None:
    """Every dropout of the model (LoRA's included) set to 0, so the old, current and reference
    log-probs of one mask draw agree and the first inner ratio is exactly 1 (TRL: disable_dropout)."""
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
        for attr in ("dropout_prob", "attention_dropout", "dropout_p"):  # attention dropout kept as a float
            if isinstance(getattr(m, attr, None), float):
                setattr(m, attr, 0.0)


def load_initial(cfg: RLConfig, empty: bool = False):
    """The policy before RL: train.init (e.g. an SFT run's final/) or model.name (tiny is rebuilt from its seed);
    with train.load_in_4bit, a LoRA base quantised to 4-bit NF4 as d1 loads it. `empty`: a folder's weights on
    the meta device (a sharded start-up)."""
    name = cfg.train.init or cfg.model.name
    if not cfg.train.load_in_4bit:
        return load_model(replace(cfg.model, name=name), empty=empty)
    return load_pretrained(name, cfg.model.trust_remote_code, cfg.model.dtype, quantization_config=nf4_config(cfg))


def nf4_config(cfg: RLConfig):
    """d1's 4-bit base: NF4 with double quantisation, computing in bfloat16. A one-line error where
    it cannot run (no LoRA, the tiny model, no CUDA, no bitsandbytes)."""
    import importlib.util

    if not cfg.train.lora:
        raise ConfigError("train.load_in_4bit=true needs train.lora=true (a 4-bit base cannot be trained itself)")
    if (cfg.train.init or cfg.model.name) == "tiny":
        raise ConfigError(
            "train.load_in_4bit=true is for pretrained models; the built-in tiny model stays in full precision"
        )
    if not torch.cuda.is_available():
        raise ConfigError(
            "train.load_in_4bit=true needs a CUDA GPU (bitsandbytes 4-bit); none is visible here. "
            "Set train.load_in_4bit=false to train on a bfloat16 base"
        )
    if importlib.util.find_spec("bitsandbytes") is None:
        raise ConfigError(
            "train.load_in_4bit=true needs bitsandbytes (pip install bitsandbytes); or set train.load_in_4bit=false"
        )
    from transformers import BitsAndBytesConfig

    return BitsAndBytesConfig(
        load_in_4bit=True,
        bnb_4bit_quant_type="nf4",
        bnb_4bit_use_double_quant=True,
        bnb_4bit_compute_dtype=torch.bfloat16,
    )


def lora_targets(spec: str):
    """train.lora_target_modules -> peft's target_modules: "all-linear" or a list of module names."""
    names = [n.strip() for n in spec.split(",") if n.strip()]
    if not names:
        raise ConfigError("train.lora_target_modules is empty; use all-linear or module names joined by commas")
    return "all-linear" if names == ["all-linear"] else names


def load_policy(cfg: RLConfig, ckpt):
    """The policy to train: from the checkpoint when resuming (a DCP checkpoint: the initial policy with
    the checkpoint's weights); wrapped with LoRA (peft) when train.lora."""
    t = cfg.train
    if is_sharded(ckpt):
        adapter = load_policy(cfg, None)
        load_sharded(ckpt, adapter.model, frozen=not t.lora)
        return adapter
    if not t.lora:
        return load_pretrained(str(ckpt), cfg.model.trust_remote_code, cfg.model.dtype) if ckpt else load_initial(cfg)
    from peft import LoraConfig, PeftModel, get_peft_model

    base = load_initial(cfg)
    if ckpt:
        model = PeftModel.from_pretrained(base.model, str(ckpt), is_trainable=True)
    else:
        # LoRA's A matrices drawn from train.seed alone: the same at any process count and load path (the RNG
        # state after loading the base depends on both), the RNG stream after it left as it was
        cuda = [torch.cuda.current_device()] if torch.cuda.is_available() else []
        with torch.random.fork_rng(devices=cuda):
            torch.manual_seed(t.seed)
            model = get_peft_model(
                base.model,
                LoraConfig(
                    r=t.lora_r,
                    lora_alpha=t.lora_alpha,
                    lora_dropout=t.lora_dropout,
                    target_modules=lora_targets(t.lora_target_modules),
                ),
            )
    return replace(base, model=model)


def start_policy(cfg: RLConfig, ckpt, par: Parallel, device, prepare=lambda model: None):
    """The policy to train on `device`, wrapped by the engine (`par.wrap`), `prepare(model)` applied before the
    wrap (gradient checkpointing, dropout). A full fine-tune under the engine from a save_pretrained folder (the
    initial policy, or an older checkpoint) starts sharded: no rank holds the whole policy, nor reads it."""
    t = cfg.train
    name = ckpt if ckpt and not is_sharded(ckpt) else (t.init or cfg.model.name)
    source = None if t.load_in_4bit else empty_source(name, par, t.lora)
    if source is None:
        adapter = load_policy(cfg, None if is_sharded(ckpt) else ckpt)
        adapter.model.to(device)
        prepare(adapter.model)
        par.wrap(adapter.model)  # fp32 trainable weights; FSDP2 units under the engine
        return adapter
    adapter = load_model(replace(cfg.model, name=str(source)), empty=True)
    prepare(adapter.model)
    start_sharded(adapter.model, source, par, device)  # a DCP checkpoint's weights are read over these (resume)
    return adapter


def start_reference(cfg: RLConfig, par: Parallel, device):
    """A full fine-tune's frozen reference (the initial policy), sharded as the policy is (no fp32 cast); started
    sharded from its folder where start_policy would."""
    source = None if cfg.train.load_in_4bit else empty_source(cfg.train.init or cfg.model.name, par)
    reference = load_initial(cfg, empty=source is not None)
    reference.model.eval().requires_grad_(False)
    if source is None:
        reference.model.to(device)
        par.wrap(reference.model, trainable=False)
    else:
        start_sharded(reference.model, source, par, device, trainable=False)
    return reference


def load_trained(name: str, trust_remote_code: bool = False, dtype: str = "float32", base: str = "") -> ModelAdapter:
    """What `eval`, `lm-eval` and `sample` load as a model: an RL run's checkpoint-STEP/ (a DCP checkpoint:
    the run's policy at that step, built from the run's config.json beside it, LoRA merged), else
    models.load_checkpoint (a save_pretrained folder, a LoRA adapter folder, a hub id, tiny)."""
    folder = Path(name)
    if not is_sharded(folder):
        return load_checkpoint(name, trust_remote_code, dtype, base)
    try:
        raw = json.loads((folder.parent / "config.json").read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"{name} is a training checkpoint (dcp/) whose run config {folder.parent / 'config.json'} "
            f"cannot be read ({type(exc).__name__}); evaluate the run's final/ instead"
        ) from exc
    cfg = apply(RLConfig(), {f.name: raw[f.name] for f in fields(RLConfig) if f.name in raw})
    cfg = replace(cfg, model=replace(cfg.model, dtype=dtype), train=replace(cfg.train, load_in_4bit=False))
    adapter = load_policy(cfg, folder)
    model = adapter.model.merge_and_unload() if cfg.train.lora else adapter.model
    return replace(adapter, model=model, source=name)
