"""Tiny folders in the published LLaDA-8B-Instruct, Dream-v0-Instruct-7B and SDAR-8B-Chat formats: the
published config fields, model_type and auto_map, the checkpoints' key names and vocabulary
sizes, the real special-token ids, random weights at a tiny width.

    folder = write_paper_folder("llada", tmp_path / "llada")   # mask 126336, eos = pad 126081
    folder = write_paper_folder("dream", tmp_path / "dream")   # mask 151666, eos = pad 151643
    folder = write_paper_folder("sdar", tmp_path / "sdar")     # mask 151669, eos = pad 151643, block size 4
    adapter = load_pretrained(str(folder))                     # the native class, no remote code
    adapter = paper_adapter("llada", d_model=64, n_layers=2)   # in memory, no folder
    folder = write_paper_folder("llada", tmp_path / "c", compact=True)  # specials right after the characters

The tokenizer is character-level with the special tokens at their real ids (the ids between
are unused); `compact=True` numbers them right after the characters instead (vocabulary ~100,
for tests whose point is not the ids: a 126k-row output layer makes every sampling step slow).
The chat layouts are written here in the models' formats, not copied.
"""

from __future__ import annotations

import json
import string
from pathlib import Path

import torch

from ..adapter import ModelAdapter

CHARS = string.printable[:95] + "\n"
# the published configs' fields (values as published; sizes made tiny by write_paper_folder)
LLADA = {
    "model_type": "llada",
    "architectures": ["LLaDAModelLM"],
    "activation_type": "silu",
    "alibi": False,
    "alibi_bias_max": 8.0,
    "attention_dropout": 0.0,
    "attention_layer_norm": False,
    "attention_layer_norm_with_affine": True,
    "bias_for_layer_norm": False,
    "block_group_size": 1,
    "block_type": "llama",
    "d_model": 4096,
    "embedding_dropout": 0.0,
    "embedding_size": 126464,
    "eos_token_id": 126081,
    "flash_attention": False,
    "include_bias": False,
    "include_qkv_bias": False,
    "init_cutoff_factor": None,
    "init_device": "meta",
    "init_fn": "mitchell",
    "init_std": 0.02,
    "input_emb_norm": False,
    "layer_norm_type": "rms",
    "layer_norm_with_affine": True,
    "mask_token_id": 126336,
    "max_sequence_length": 4096,
    "mlp_hidden_size": 12288,
    "mlp_ratio": 4,
    "multi_query_attention": None,
    "n_heads": 32,
    "n_kv_heads": 32,
    "n_layers": 32,
    "pad_token_id": 126081,
    "precision": "amp_bf16",
    "residual_dropout": 0.0,
    "rms_norm_eps": 1e-05,
    "rope": True,
    "rope_full_precision": True,
    "rope_theta": 500000.0,
    "scale_logits": False,
    "use_cache": False,
    "vocab_size": 126464,
    "weight_tying": False,
    "auto_map": {
        "AutoConfig": "configuration_llada.LLaDAConfig",
        "AutoModelForCausalLM": "modeling_llada.LLaDAModelLM",
        "AutoModel": "modeling_llada.LLaDAModelLM",
    },
}
DREAM = {
    "model_type": "Dream",
    "architectures": ["DreamModel"],
    "attention_dropout": 0.0,
    "bos_token_id": 151643,
    "eos_token_id": 151643,
    "hidden_act": "silu",
    "hidden_size": 3584,
    "initializer_range": 0.02,
    "intermediate_size": 18944,
    "mask_token_id": 151666,
    "max_position_embeddings": 131072,
    "max_window_layers": 28,
    "num_attention_heads": 28,
    "num_hidden_layers": 28,
    "num_key_value_heads": 4,
    "pad_token_id": 151643,
    "rms_norm_eps": 1e-06,
    "rope_scaling": None,
    "rope_theta": 1000000.0,
    "sliding_window": None,
    "tie_word_embeddings": False,
    "use_cache": True,
    "use_mrope": False,
    "use_sliding_window": False,
    "vocab_size": 152064,
    "auto_map": {"AutoConfig": "configuration_dream.DreamConfig", "AutoModel": "modeling_dream.DreamModel"},
}
SDAR = {  # SDAR-8B-Chat's config.json (JetAstra/SDAR, training/model/SDAR-8B-Chat)
    "model_type": "sdar",
    "architectures": ["SDARForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "attn_implementation": "flex_attention",
    "block_size": 4,
    "bos_token_id": 151643,
    "debug": False,
    "eos_token_id": 151643,
    "ep_size": 1,
    "fuse_cross_entropy": True,
    "head_dim": 128,
    "hidden_act": "silu",
    "hidden_size": 4096,
    "initializer_range": 0.02,
    "intermediate_size": 12288,
    "mask_token_id": 151669,
    "max_position_embeddings": 32768,
    "max_window_layers": 36,
    "micro_forward": False,
    "num_attention_heads": 32,
    "num_hidden_layers": 36,
    "num_key_value_heads": 8,
    "pad_token_id": 151643,
    "rms_norm_eps": 1e-06,
    "rope_scaling": None,
    "rope_theta": 1000000,
    "skip_checkpoint": False,
    "sliding_window": None,
    "tie_word_embeddings": False,
    "use_cache": False,
    "use_deepep": False,
    "use_sliding_window": False,
    "vocab_size": 151936,
    "auto_map": {
        "AutoConfig": "configuration_sdar.SDARConfig",
        "AutoModel": "modeling_sdar.SDARModel",
        "AutoModelForCausalLM": "modeling_sdar.SDARForCausalLM",
    },
}
TINY = {
    "llada": {"d_model": 32, "n_heads": 4, "n_kv_heads": 4, "n_layers": 2, "mlp_hidden_size": 64},
    "dream": {
        "hidden_size": 32,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "num_hidden_layers": 2,
        "intermediate_size": 64,
    },
    "sdar": {
        "hidden_size": 32,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "num_hidden_layers": 2,
        "intermediate_size": 64,
    },
}
SPECIALS = {
    "llada": {
        "<|startoftext|>": 126080,
        "<|endoftext|>": 126081,
        "<|mdm_mask|>": 126336,
        "<|start_header_id|>": 126346,
        "<|end_header_id|>": 126347,
        "<|eot_id|>": 126348,
    },
    "dream": {
        "<|endoftext|>": 151643,
        "<|im_start|>": 151644,
        "<|im_end|>": 151645,
        "<|beginoftext|>": 151665,
        "<|mask|>": 151666,
    },
    "sdar": {"<|endoftext|>": 151643, "<|im_start|>": 151644, "<|im_end|>": 151645, "<|MASK|>": 151669},
}
# LLaDA-8B-Instruct's chat layout: one header per turn, the content trimmed, the assistant header
# left open by add_generation_prompt (written here; the marker strings are LLaDA's special tokens).
LLADA_CHAT_TEMPLATE = (
    "{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n{{ m['content'] | trim }}"
    "<|eot_id|>{% endfor %}{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)
# Dream's chat layout (ChatML with a default system turn), written here
DREAM_CHAT_TEMPLATE = (
    "{% if messages[0]['role'] != 'system' %}<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


MASK = {"llada": "<|mdm_mask|>", "dream": "<|mask|>", "sdar": "<|MASK|>"}
FIELDS = {"llada": LLADA, "dream": DREAM, "sdar": SDAR}
# SDAR's chat layout (Qwen3's ChatML, no default system turn; its thinking markup left out), written here
SDAR_CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def _char_vocab() -> dict[str, int]:
    vocab = {c: i for i, c in enumerate(dict.fromkeys(CHARS))}
    vocab["<unk>"] = len(vocab)
    return vocab


def special_ids(family: str, compact: bool = False) -> dict[str, int]:
    """The special tokens' ids: the published ones, or (compact) numbered right after the characters."""
    if not compact:
        return dict(SPECIALS[family])
    start = len(_char_vocab())
    return {t: start + i for i, t in enumerate(SPECIALS[family])}


def paper_tokenizer(family: str, compact: bool = False):
    """A character tokenizer whose special tokens sit at the published ids (or compact ones)."""
    from tokenizers import Tokenizer, decoders, models
    from transformers import PreTrainedTokenizerFast

    specials = special_ids(family, compact)
    vocab = _char_vocab()
    core = Tokenizer(models.BPE(vocab={**vocab, **specials}, merges=[], unk_token="<unk>"))
    core.decoder = decoders.Fuse()
    eos = "<|endoftext|>"
    kw = {"mask_token": MASK[family]} if family != "llada" else {}  # LLaDA's tokenizer names no mask: the config does
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core,
        eos_token=eos,
        pad_token=eos,
        unk_token="<unk>",
        additional_special_tokens=[t for t in specials if t != eos],
        clean_up_tokenization_spaces=False,
        **kw,
    )
    tok.bos_token = {"llada": "<|startoftext|>", "dream": "<|beginoftext|>"}.get(family, eos)
    tok.chat_template = {"llada": LLADA_CHAT_TEMPLATE, "dream": DREAM_CHAT_TEMPLATE}.get(family, SDAR_CHAT_TEMPLATE)
    tok.model_input_names = ["input_ids", "attention_mask"]
    return tok


def paper_config(family: str, compact: bool = False, **sizes) -> dict:
    """The published config dict at a tiny size (TINY, then `sizes`); with compact, the special-token
    ids and the vocabulary follow special_ids(compact=True)."""
    fields = {**FIELDS[family], **TINY[family]}
    if compact:
        ids = special_ids(family, compact=True)
        eos, rows = ids["<|endoftext|>"], max(ids.values()) + 1
        fields.update({k: eos for k in ("bos_token_id", "eos_token_id", "pad_token_id") if k in fields})
        fields.update({k: rows for k in ("vocab_size", "embedding_size") if k in fields})
        fields["mask_token_id"] = ids[MASK[family]]
    return {**fields, **sizes}


def paper_model(family: str, seed: int = 0, dtype: torch.dtype = torch.float32, compact: bool = False, **sizes):
    """The native class at the published config made tiny (TINY, then `sizes`), random weights from `seed`."""
    from ..archs import NATIVE

    fields = paper_config(family, compact, **sizes)
    model_cls = NATIVE[family]
    config_cls = model_cls.config_class
    torch.manual_seed(seed)
    return model_cls(config_cls(**{k: v for k, v in fields.items() if k != "model_type"})).to(dtype)


def paper_adapter(
    family: str, seed: int = 0, dtype: torch.dtype = torch.float32, compact: bool = False, **sizes
) -> ModelAdapter:
    """The native model in memory (no folder) with the paper tokenizer, for sizes whose weights are
    not worth writing; the mask, eos and pad ids are the config's and must fit its output rows."""
    from ..archs import block_size_of

    model = paper_model(family, seed, dtype, compact, **sizes)
    cfg, rows = model.config, model.get_output_embeddings().out_features
    ids = {k: getattr(cfg, k) for k in ("mask_token_id", "eos_token_id", "pad_token_id")}
    for key, value in ids.items():
        if not 0 <= value < rows:
            raise ValueError(f"{key}={value} is outside the model's {rows} output rows; pass {key} below {rows}")
    return ModelAdapter(
        model,
        paper_tokenizer(family, compact),
        ids["mask_token_id"],
        ids["eos_token_id"],
        ids["pad_token_id"],
        shift_logits=family == "dream",
        source=f"paper:{family}",
        block_size=block_size_of(cfg),
    )


def write_paper_folder(
    family: str, folder: str | Path, seed: int = 0, dtype: torch.dtype = torch.float32, compact: bool = False, **sizes
) -> Path:
    """A folder laid out as the published hub repository (config.json with auto_map, safetensors by
    the published key names, tokenizer), without the modeling files: it loads through the native class."""
    folder = Path(folder)
    fields = paper_config(family, compact, **sizes)
    model = paper_model(family, seed, dtype, compact, **sizes)
    model.save_pretrained(folder)
    (folder / "config.json").write_text(json.dumps({**fields, "torch_dtype": str(dtype).split(".")[-1]}, indent=2))
    paper_tokenizer(family, compact).save_pretrained(folder)
    ids = {k: fields[k] for k in ("bos_token_id", "eos_token_id", "pad_token_id") if k in fields}
    (folder / "generation_config.json").write_text(json.dumps(ids, indent=2))  # the published Dream code reads one
    return folder
