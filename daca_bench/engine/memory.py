"""Activation memory at paper scale: gradient checkpointing, `sml.chunk` sized from free GPU
memory when it is 0, and the one-line out-of-memory error that names the knobs.

    enable_gradient_checkpointing(adapter.model)            # train.gradient_checkpointing=true
    chunk = sml_chunk(adapter, cfg, seq_len=P + L)          # rows per likelihood forward pass

The row estimate (`rows_that_fit`) keeps, per canvas token, the 16-bit logits row that the
chunked log-softmax holds for the backward pass, plus per layer either the layer input
(checkpointing) or ~34 h bytes of intermediates (Korthikanti et al., 2022, without the
attention-score term that fused attention avoids), and uses half the free memory.
"""
from __future__ import annotations

import torch

from ..config import ConfigError, RLConfig

KNOBS = ("sml.chunk (rows per likelihood pass), train.grad_accum (micro-batches), "
         "train.gradient_checkpointing=true, rollout.batch_size / eval.batch_size")


def enable_gradient_checkpointing(model) -> None:
    core = model.get_base_model() if hasattr(model, "get_base_model") else model  # peft
    if not getattr(core, "supports_gradient_checkpointing", False):
        raise ConfigError(f"train.gradient_checkpointing: {type(core).__name__} does not support it; set it to false")
    if hasattr(core, "activation_checkpointing_enable"):  # transformers >= 5.x names it so
        core.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    else:
        core.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})


def _config_value(config, *names) -> int:
    for name in names:
        if getattr(config, name, None):
            return int(getattr(config, name))
    raise ValueError(f"model config has none of {', '.join(names)}")


def rows_that_fit(free_bytes: int, seq_len: int, vocab: int, hidden: int, layers: int, dtype_bytes: int,
                  checkpointing: bool) -> int:
    """How many (P+L)-token canvases one likelihood forward + backward can hold in half of `free_bytes`."""
    per_layer = 2 * hidden if checkpointing else 34 * hidden * dtype_bytes // 2
    per_row = seq_len * (vocab * dtype_bytes + layers * per_layer)
    return max(1, int(0.5 * free_bytes) // per_row)


def sml_chunk(adapter, cfg: RLConfig, seq_len: int) -> int | None:
    """Rows per likelihood forward pass: sml.chunk when set; on CUDA with 0, from the free memory; else all."""
    if cfg.sml.chunk or adapter.device.type != "cuda":
        return cfg.sml.chunk or None
    config = adapter.model.config
    free, _ = torch.cuda.mem_get_info(adapter.device)
    dtype_bytes = next(adapter.model.parameters()).element_size()
    return rows_that_fit(free, seq_len, _config_value(config, "vocab_size", "embedding_size"),
                         _config_value(config, "hidden_size", "d_model"),
                         _config_value(config, "num_hidden_layers", "n_layers"), dtype_bytes,
                         cfg.train.gradient_checkpointing)


def out_of_memory(step: int, exc: BaseException) -> ConfigError:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return ConfigError(f"out of memory in training step {step} ({first[:120]}); lower {KNOBS}")
