"""Tiny folders in the published LLaDA-8B-Instruct and Dream-v0-Instruct-7B formats: the
published config fields, model_type and auto_map, the checkpoints' key names and vocabulary
sizes, the real special-token ids, random weights at a tiny width.

    folder = write_paper_folder("llada", tmp_path / "llada")   # mask 126336, eos = pad 126081
    folder = write_paper_folder("dream", tmp_path / "dream")   # mask 151666, eos = pad 151643
    adapter = load_pretrained(str(folder))                     # the native class, no remote code

The tokenizer is character-level with the special tokens at their real ids (the ids between
are unused). The chat layouts are written here in the models' formats, not copied.
"""
from __future__ import annotations

import json
import string
from pathlib import Path

import torch

from . import LLADA_CHAT_TEMPLATE

CHARS = string.printable[:95] + "\n"
# the published configs' fields (values as published; sizes made tiny by write_paper_folder)
LLADA = {"model_type": "llada", "architectures": ["LLaDAModelLM"], "activation_type": "silu", "alibi": False,
         "alibi_bias_max": 8.0, "attention_dropout": 0.0, "attention_layer_norm": False,
         "attention_layer_norm_with_affine": True, "bias_for_layer_norm": False, "block_group_size": 1,
         "block_type": "llama", "d_model": 4096, "embedding_dropout": 0.0, "embedding_size": 126464,
         "eos_token_id": 126081, "flash_attention": False, "include_bias": False, "include_qkv_bias": False,
         "init_cutoff_factor": None, "init_device": "meta", "init_fn": "mitchell", "init_std": 0.02,
         "input_emb_norm": False, "layer_norm_type": "rms", "layer_norm_with_affine": True, "mask_token_id": 126336,
         "max_sequence_length": 4096, "mlp_hidden_size": 12288, "mlp_ratio": 4, "multi_query_attention": None,
         "n_heads": 32, "n_kv_heads": 32, "n_layers": 32, "pad_token_id": 126081, "precision": "amp_bf16",
         "residual_dropout": 0.0, "rms_norm_eps": 1e-05, "rope": True, "rope_full_precision": True,
         "rope_theta": 500000.0, "scale_logits": False, "use_cache": False, "vocab_size": 126464, "weight_tying": False,
         "auto_map": {"AutoConfig": "configuration_llada.LLaDAConfig", "AutoModelForCausalLM": "modeling_llada.LLaDAModelLM",
                      "AutoModel": "modeling_llada.LLaDAModelLM"}}
DREAM = {"model_type": "Dream", "architectures": ["DreamModel"], "attention_dropout": 0.0, "bos_token_id": 151643,
         "eos_token_id": 151643, "hidden_act": "silu", "hidden_size": 3584, "initializer_range": 0.02,
         "intermediate_size": 18944, "mask_token_id": 151666, "max_position_embeddings": 131072, "max_window_layers": 28,
         "num_attention_heads": 28, "num_hidden_layers": 28, "num_key_value_heads": 4, "pad_token_id": 151643,
         "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 1000000.0, "sliding_window": None,
         "tie_word_embeddings": False, "use_cache": True, "use_mrope": False, "use_sliding_window": False,
         "vocab_size": 152064, "auto_map": {"AutoConfig": "configuration_dream.DreamConfig", "AutoModel": "modeling_dream.DreamModel"}}
TINY = {"llada": {"d_model": 32, "n_heads": 4, "n_kv_heads": 4, "n_layers": 2, "mlp_hidden_size": 64},
        "dream": {"hidden_size": 32, "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2,
                  "intermediate_size": 64}}
SPECIALS = {"llada": {"<|startoftext|>": 126080, "<|endoftext|>": 126081, "<|mdm_mask|>": 126336,
                      "<|start_header_id|>": 126346, "<|end_header_id|>": 126347, "<|eot_id|>": 126348},
            "dream": {"<|endoftext|>": 151643, "<|im_start|>": 151644, "<|im_end|>": 151645,
                      "<|beginoftext|>": 151665, "<|mask|>": 151666}}
# Dream's chat layout (ChatML with a default system turn), written here
DREAM_CHAT_TEMPLATE = (
    "{% if messages[0]['role'] != 'system' %}<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def paper_tokenizer(family: str):
    """A character tokenizer whose special tokens sit at the published ids."""
    from tokenizers import Tokenizer, decoders, models
    from transformers import PreTrainedTokenizerFast

    specials = SPECIALS[family]
    vocab = {c: i for i, c in enumerate(dict.fromkeys(CHARS))}
    vocab["<unk>"] = len(vocab)
    core = Tokenizer(models.BPE(vocab={**vocab, **specials}, merges=[], unk_token="<unk>"))
    core.decoder = decoders.Fuse()
    eos = "<|endoftext|>"
    kw = {"mask_token": "<|mask|>"} if family == "dream" else {}  # LLaDA's tokenizer names no mask: the config does
    tok = PreTrainedTokenizerFast(tokenizer_object=core, eos_token=eos, pad_token=eos, unk_token="<unk>",
                                  additional_special_tokens=[t for t in specials if t != eos],
                                  clean_up_tokenization_spaces=False, **kw)
    tok.bos_token = "<|startoftext|>" if family == "llada" else "<|beginoftext|>"
    tok.chat_template = LLADA_CHAT_TEMPLATE if family == "llada" else DREAM_CHAT_TEMPLATE
    tok.model_input_names = ["input_ids", "attention_mask"]
    return tok


def paper_config(family: str, **sizes) -> dict:
    """The published config dict at a tiny size (TINY, then `sizes`)."""
    return {**(LLADA if family == "llada" else DREAM), **TINY[family], **sizes}


def write_paper_folder(family: str, folder: str | Path, seed: int = 0, dtype: torch.dtype = torch.float32,
                       **sizes) -> Path:
    """A folder laid out as the published hub repository (config.json with auto_map, safetensors by
    the published key names, tokenizer), without the modeling files: it loads through the native class."""
    from ..archs import DreamConfig, DreamModel, LLaDAConfig, LLaDAModelLM

    folder = Path(folder)
    fields = paper_config(family, **sizes)
    config_cls, model_cls = (LLaDAConfig, LLaDAModelLM) if family == "llada" else (DreamConfig, DreamModel)
    torch.manual_seed(seed)
    model = model_cls(config_cls(**{k: v for k, v in fields.items() if k != "model_type"})).to(dtype)
    model.save_pretrained(folder)
    (folder / "config.json").write_text(json.dumps({**fields, "torch_dtype": str(dtype).split(".")[-1]}, indent=2))
    paper_tokenizer(family).save_pretrained(folder)
    ids = {k: fields[k] for k in ("bos_token_id", "eos_token_id", "pad_token_id") if k in fields}
    (folder / "generation_config.json").write_text(json.dumps(ids, indent=2))  # the published Dream code reads one
    return folder
