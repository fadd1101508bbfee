"""Models for tests and the GPU check, built from a config with random weights.

    folder = write_llada_tiny(tmp_path / "llada")             # remote-code folder (auto_map)
    adapter = load_pretrained(str(folder), trust_remote_code=True)
    adapter = build_llada(hidden_size=2048, num_hidden_layers=12, vocab_size=126_464)  # in memory
    folder = write_llada_tiny(tmp_path / "llada", llada_tokenizer=True)  # pad = eos and a chat template, as LLaDA's

The LLaDA-shaped model (`llada_tiny/`) is a Llama-style bidirectional decoder: RMSNorm,
rotary, SwiGLU, no causal mask, the mask id in its config. Its code is written here, not
taken from LLaDA; written to a folder with `auto_map` it loads through the same adapter path
as LLaDA and Dream (`trust_remote_code`).
"""
from __future__ import annotations

import shutil
from pathlib import Path

import torch

from ..models import ModelAdapter, build_char_tokenizer

CODE = Path(__file__).parent / "llada_tiny"
AUTO_MAP = {"AutoConfig": "configuration_llada_tiny.LLaDATinyConfig", "AutoModel": "modeling_llada_tiny.LLaDATinyModel"}


# LLaDA-8B-Instruct's chat layout: one header per turn, the content trimmed, the assistant header
# left open by add_generation_prompt (written here; the marker strings are LLaDA's special tokens).
LLADA_CHAT_TEMPLATE = (
    "{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n{{ m['content'] | trim }}"
    "<|eot_id|>{% endfor %}{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}")


def llada_like_tokenizer():
    """The character tokenizer shaped like LLaDA's where it matters: pad = eos (LLaDA's 126081,
    d1 sets pad_token = eos_token) and LLaDA's chat layout."""
    tok = build_char_tokenizer()
    tok.pad_token = tok.eos_token
    tok.chat_template = LLADA_CHAT_TEMPLATE
    return tok


def _model(seed: int, llada_tokenizer: bool = False, **config):
    from .llada_tiny.configuration_llada_tiny import LLaDATinyConfig
    from .llada_tiny.modeling_llada_tiny import LLaDATinyModel

    tok = llada_like_tokenizer() if llada_tokenizer else build_char_tokenizer()
    cfg = LLaDATinyConfig(**{"vocab_size": len(tok), "mask_token_id": tok.mask_token_id, "pad_token_id": tok.pad_token_id,
                             "eos_token_id": tok.eos_token_id, **config})
    if cfg.vocab_size < len(tok):
        raise ValueError(f"vocab_size={cfg.vocab_size} is below the tokenizer's {len(tok)} ids")
    torch.manual_seed(seed)
    return LLaDATinyModel(cfg), tok


def build_llada(seed: int = 0, dtype: torch.dtype = torch.float32, **config) -> ModelAdapter:
    """The LLaDA-shaped model in memory (no folder): for sizes whose weights are not worth writing."""
    model, tok = _model(seed, **config)
    model = model.to(dtype)
    return ModelAdapter(model, tok, model.config.mask_token_id, tok.eos_token_id, tok.pad_token_id, source="llada_tiny")


def write_llada_tiny(folder: str | Path, seed: int = 0, dtype: torch.dtype = torch.float32,
                     llada_tokenizer: bool = False, **config) -> Path:
    """A save_pretrained folder with the model code beside it and `auto_map`, like LLaDA's on the hub
    (with llada_tokenizer, LLaDA's pad = eos and chat layout: llada_like_tokenizer)."""
    folder = Path(folder)
    model, tok = _model(seed, llada_tokenizer, **config)
    model = model.to(dtype)
    model.config.auto_map = AUTO_MAP
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    for src in CODE.glob("*_llada_tiny.py"):
        shutil.copy(src, folder / src.name)
    return folder
