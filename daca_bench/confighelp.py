"""Help for every config key: `daca-bench train --print-config` (and sft, sample) lists each
dotted key with its current value and a help text. Help comes from the comment after the
field in config.py, else from HELP below (keyed `Section.field`)."""

from __future__ import annotations

import inspect
import io
import textwrap
import tokenize
from dataclasses import fields, is_dataclass
from typing import Any

from .config import TRL_ALIASES

_MODEL_SHAPE = "the tiny model's {} (ignored for a loaded model)"
HELP = {
    "ModelConfig.num_layers": _MODEL_SHAPE.format("transformer layers"),
    "ModelConfig.num_heads": _MODEL_SHAPE.format("attention heads"),
    "ModelConfig.intermediate_size": _MODEL_SHAPE.format("MLP width"),
    "ModelConfig.max_positions": _MODEL_SHAPE.format("longest prompt + completion"),
    "ModelConfig.seed": "seed of the tiny model's initial weights",
    "SamplerConfig.batch_size": "sequences per sampling forward pass (memory, not results)",
    "TrainConfig.task": "registered task to train on (daca-bench tasks)",
    "TrainConfig.steps": "RL steps (rollout batches); TRL: max_steps",
    "TrainConfig.lr": "AdamW learning rate; TRL: learning_rate",
    "TrainConfig.weight_decay": "AdamW weight decay",
    "TrainConfig.warmup_steps": "linear learning-rate warmup steps",
    "TrainConfig.grad_clip": "gradient-norm clip; TRL: max_grad_norm",
    "TrainConfig.n_train": "train-split prompts to draw from; None = the task's default size",
    "TrainConfig.n_eval": "test prompts in the greedy evaluation",
    "TrainConfig.save_every": "steps between checkpoints",
    "TrainConfig.seed": "seed of prompt order, sampling and strata",
    "TrainConfig.threads": "torch threads; 0 = all cores",
    "TrainConfig.lora": "train LoRA adapters instead of all weights (needs peft)",
    "TrainConfig.lora_r": "LoRA rank",
    "TrainConfig.lora_alpha": "LoRA alpha",
    "DPSConfig.enabled": "weight each token's loss by its Denoising Progress Score",
    "DPSConfig.lam": "lambda: w = clip(1 + lambda z, w_min, w_max)",
    "DPSConfig.w_min": "smallest DPS weight before rescaling to mean 1",
    "DPSConfig.w_max": "largest DPS weight before rescaling to mean 1",
    "RLConfig.output_dir": "run folder (checkpoint, metrics.jsonl, summary.json, final/)",
    "SFTConfig.task": "registered task whose gold completions SFT trains on",
    "SFTConfig.n_eval": "test prompts in the final greedy evaluation",
    "SFTConfig.steps": "optimizer steps",
    "SFTConfig.batch_size": "sequences per step",
    "SFTConfig.lr": "AdamW learning rate",
    "SFTConfig.weight_decay": "AdamW weight decay",
    "SFTConfig.warmup_steps": "linear learning-rate warmup steps",
    "SFTConfig.grad_clip": "gradient-norm clip",
    "SFTConfig.seed": "seed of data order and masking",
    "RunConfig.output_dir": "run folder (checkpoints, final/)",
}


def field_help(cls) -> dict[str, str]:
    """Each field's help: its comment in the dataclass source, else HELP[`Class.field`]."""
    out = {f.name: HELP.get(f"{cls.__name__}.{f.name}", "") for f in fields(cls)}
    # a field's comment is the first one inside its statement, wherever the formatter put it: on the
    # `name: type = value` line or inside a value wrapped in parentheses over several lines
    source = textwrap.dedent(inspect.getsource(cls))
    name, start, seen = None, True, False
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
            name, start, seen = None, True, False
            continue
        if start and tok.type == tokenize.NAME:
            name = tok.string
        elif tok.type == tokenize.COMMENT and name in out and not seen:
            out[name], seen = tok.string.lstrip("#").strip(), True
        if tok.type not in (tokenize.NL, tokenize.COMMENT):
            start = False
    return out


def describe(cfg, prefix: str = "") -> list[tuple[str, Any, str]]:
    """(dotted key, current value, help) for every key of a config, sections flattened."""
    rows, helps = [], field_help(type(cfg))
    for f in fields(cfg):
        value = getattr(cfg, f.name)
        if is_dataclass(value):
            rows += describe(value, f"{prefix}{f.name}.")
        else:
            rows.append((prefix + f.name, value, helps[f.name]))
    return rows


def print_config(cfg) -> None:
    """key = value  # help, one line each; for an RL config, then TRL's aliases."""
    rows = describe(cfg)
    width = max(len(f"{k} = {v!r}") for k, v, _ in rows)
    for key, value, help_ in rows:
        print(f"{f'{key} = {value!r}'.ljust(width)}  # {help_}")
    if hasattr(cfg, "train") and hasattr(cfg, "loss"):
        print(
            "\nTRL's names are accepted as overrides too: "
            + ", ".join(f"{name} -> {ours}" for name, (ours, _) in TRL_ALIASES.items())
        )
