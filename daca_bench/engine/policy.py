"""The policy RL trains and its reference: loaded from train.init (an SFT run) or model.name, resumed from
a checkpoint, wrapped with LoRA (peft) and, as d1 loads it, on a 4-bit NF4 base; dropout off.

    adapter = load_policy(cfg, ckpt)   # ckpt None: the policy before RL
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


def disable_dropout(model) -> None:
    """Every dropout of the model (LoRA's included) set to 0, so the old, current and reference
    log-probs of one mask draw agree and the first inner ratio is exactly 1 (TRL: disable_dropout)."""
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
        for attr in ("dropout_prob", "attention_dropout", "dropout_p"):  # attention dropout kept as a float
            if isinstance(getattr(m, attr, None), float):
                setattr(m, attr, 0.0)


def load_initial(cfg: RLConfig):
    """The policy before RL: train.init (e.g. an SFT run's final/) or model.name (tiny is rebuilt from its seed);
    with train.load_in_4bit, a LoRA base quantised to 4-bit NF4 as d1 loads it."""
    name = cfg.train.init or cfg.model.name
    if not cfg.train.load_in_4bit:
        return load_model(replace(cfg.model, name=name))
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
