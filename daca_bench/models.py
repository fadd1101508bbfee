"""Loading models: every source the harness can train, each into one `ModelAdapter` (daca_bench.adapter).

    adapter = load_model(ModelConfig(name="tiny"))      # built from a config, ~0.8M params
    adapter = load_checkpoint("runs/sft-tiny/final")    # a saved folder, a LoRA adapter merged in

Sources: the built-in tiny model (a bidirectional BERT masked LM with a character-level
tokenizer built offline with `tokenizers`), any folder saved with `save_pretrained`, any hub
masked LM (`AutoModelForMaskedLM`), and LLaDA / Dream through the native classes of
`daca_bench.archs`, picked by the folder's model_type (the published remote code stays behind
`trust_remote_code`, patched for transformers 5). Mask id from the tokenizer or config; Dream's
adapter shifts its raw logits right by one position so that logits[i] predicts token i.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch

from .adapter import ModelAdapter
from .chars import build_char_tokenizer
from .config import ModelConfig, pick
from .errors import ConfigError, UnavailableError

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def build_tiny_model(cfg: ModelConfig, tokenizer):
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(cfg.seed)
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=cfg.hidden_size,
        num_hidden_layers=cfg.num_layers,
        num_attention_heads=cfg.num_heads,
        intermediate_size=cfg.intermediate_size,
        max_position_embeddings=cfg.max_positions,
        pad_token_id=tokenizer.pad_token_id,
        type_vocab_size=1,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    return BertForMaskedLM(config)


def _mask_id(tokenizer, config) -> int:
    for value in (getattr(tokenizer, "mask_token_id", None), getattr(config, "mask_token_id", None)):
        if value is not None:
            return int(value)
    raise ValueError("model has no mask token: neither its tokenizer nor its config defines mask_token_id")


def _eos_id(tokenizer, config) -> int:
    for value in (getattr(tokenizer, "eos_token_id", None), getattr(config, "eos_token_id", None)):
        if isinstance(value, list):
            value = value[0] if value else None
        if value is not None:
            return int(value)
    raise ValueError("model has no EOS token in its tokenizer or config")


def load_tokenizer(name: str, trust_remote_code: bool = False):
    """A folder's or hub id's tokenizer. Dream ships its own tokenizer class (Qwen2's byte-level BPE
    under another name): without trust_remote_code it loads as transformers' Qwen2 tokenizer."""
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # a model_type AutoConfig does not know (llada, Dream) is fine here
    try:
        return AutoTokenizer.from_pretrained(name, trust_remote_code=trust_remote_code)
    except (OSError, ValueError) as exc:
        if trust_remote_code or "trust_remote_code" not in str(exc) or "dream" not in _model_type(name):
            raise
    finally:
        hf_logging.set_verbosity(level)
    from transformers import Qwen2TokenizerFast

    return Qwen2TokenizerFast.from_pretrained(name)


def _model_type(name: str) -> str:
    """config.json's model_type of a local folder or a cached hub id, lower-cased ("" when unknown)."""
    path = Path(name) / "config.json"
    if not path.exists():
        try:
            from huggingface_hub import try_to_load_from_cache

            cached = try_to_load_from_cache(name, "config.json")
        except ValueError:
            cached = None
        path = Path(cached) if isinstance(cached, str) else None
    try:
        return str(json.loads(path.read_text()).get("model_type", "")).lower() if path else ""
    except (OSError, ValueError):
        return ""


def _remote_class(config, name: str, key: str):
    """The published remote-code class, patched in memory for the installed transformers."""
    from transformers.dynamic_module_utils import get_class_from_dynamic_module

    from .archs.remote import patch_module

    cls = get_class_from_dynamic_module(config.auto_map[key], name)
    patch_module(sys.modules[cls.__module__])
    cls.register_for_auto_class(key)  # save_pretrained then copies the code beside the weights, as AutoModel does
    return cls


def load_pretrained(
    name: str, trust_remote_code: bool = False, dtype: str = "float32", quantization_config=None
) -> ModelAdapter:
    """A local save_pretrained folder or a hub id: masked LMs; LLaDA and Dream through the native
    classes (daca_bench.archs) unless trust_remote_code asks for their own code. `quantization_config`
    (bitsandbytes 4-bit, train.load_in_4bit) goes to from_pretrained."""
    from transformers import AutoConfig, AutoModelForMaskedLM
    from transformers.utils import logging as hf_logging

    from .archs import SHIFTED, native_class

    hf_logging.disable_progress_bar()
    torch_dtype = pick(DTYPES, dtype, "model.dtype")
    quant = (
        {"quantization_config": quantization_config, "device_map": {"": default_device()}}
        if quantization_config
        else {}
    )
    native = None if trust_remote_code else native_class(_model_type(name))
    try:
        config = (
            native.config_class.from_pretrained(name)
            if native
            else AutoConfig.from_pretrained(name, trust_remote_code=trust_remote_code)
        )
    except (OSError, ValueError) as exc:  # a missing folder, a malformed hub id, not cached offline
        if "trust_remote_code" in str(exc):
            raise ConfigError(
                f"{name} ships its own model code; pass model.trust_remote_code=true "
                "(--trust-remote-code on the command line)"
            ) from exc
        if Path(name).is_dir():
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise UnavailableError(
                f"cannot load the model folder {name}: {first} Point it at a save_pretrained "
                "folder (e.g. an SFT run's final/)"
            ) from exc
        raise UnavailableError(
            f"cannot load model {name!r}: it is neither a save_pretrained folder nor a hub id "
            "in the local cache; check the path (model.name, train.init or --model)"
        ) from exc
    tokenizer = load_tokenizer(name, trust_remote_code)
    model_type = str(getattr(config, "model_type", "")).lower()
    family = "dream" if "dream" in model_type else model_type
    shift = family in SHIFTED
    stored = json.loads(extra.read_text()) if (extra := Path(name) / "daca_adapter.json").exists() else {}
    shift = stored.get("shift_logits", shift)
    auto_map = getattr(config, "auto_map", None) or {}
    if native:
        model = native.from_pretrained(name, config=config, dtype=torch_dtype, **quant)
    else:
        if auto_map and not trust_remote_code:
            raise ValueError(f"{name} ships its own model code ({model_type}); pass model.trust_remote_code=true")
        key = "AutoModelForMaskedLM" if "AutoModelForMaskedLM" in auto_map else "AutoModel"
        if auto_map:
            from .archs.remote import fix_loaded

            model = _remote_class(config, name, key).from_pretrained(name, config=config, dtype=torch_dtype, **quant)
            fix_loaded(model)
        else:
            model = AutoModelForMaskedLM.from_pretrained(name, dtype=torch_dtype, **quant)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else _eos_id(tokenizer, config)
    return ModelAdapter(
        model,
        tokenizer,
        _mask_id(tokenizer, config),
        _eos_id(tokenizer, config),
        int(pad),
        shift_logits=shift,
        source=name,
        square_mask=bool(auto_map) and family == "dream" and not native,
        block_size=int(stored.get("block_size", getattr(config, "block_size", 0) if native else 0)),
    )


def require_available(cfg: ModelConfig, need_gpu: bool = False) -> None:
    """Fail fast, before any work, when a preset needs a GPU or weights this machine lacks."""
    import torch as _torch

    if need_gpu and not _torch.cuda.is_available():
        raise UnavailableError(
            f"this preset needs a CUDA GPU ({cfg.name}); none is visible here. "
            "Run it on a GPU machine, or use configs/tiny.yaml on a CPU."
        )
    if cfg.name == "tiny" or Path(cfg.name).is_dir():
        return
    from huggingface_hub import try_to_load_from_cache

    try:
        cached = isinstance(try_to_load_from_cache(cfg.name, "config.json"), str)
    except ValueError:  # not even a valid hub id: a folder path that does not exist
        raise UnavailableError(
            f"no such model folder {cfg.name}; check the path (model.name or train.init){_how_to_make(cfg.name)}"
        ) from None
    if not cached:
        raise UnavailableError(
            f"weights for {cfg.name!r} are neither a local folder nor in the Hugging Face cache. "
            f"Download them where the hub is reachable (`hf download {cfg.name}`) "
            "or set model.name to a local save_pretrained folder."
        )


def _how_to_make(name: str) -> str:
    """How to make a missing folder that an SFT run writes (`OUTPUT/final`), for the error line."""
    path = Path(name)
    if path.name != "final":
        return ""
    shipped = {"runs/sft-tiny": "configs/tiny_sft.yaml"}.get(path.parent.as_posix())
    hint = f"daca-bench sft --config {shipped}" if shipped else f"daca-bench sft ... --output-dir {path.parent}"
    return f"; an SFT run writes it: {hint}"


def run_canvas(name: str) -> tuple[dict, Path] | None:
    """The canvas (gen_length, block_length, steps) a model was trained and checked with, read from
    the config.json of the run that wrote it (an SFT or RL run's `final/` or `checkpoint-STEP/`);
    None for tiny, hub ids and folders without one."""
    folder = Path(name)
    if name == "tiny" or not folder.is_dir():
        return None
    stored = folder.parent / "config.json"
    try:
        run = json.loads(stored.read_text())
    except (OSError, ValueError):
        return None
    section = run.get("eval") or run.get("sampler") if isinstance(run, dict) else None
    if not isinstance(section, dict) or not all(
        isinstance(section.get(k), int) for k in ("gen_length", "block_length", "steps")
    ):
        return None
    return {k: section[k] for k in ("gen_length", "block_length", "steps")}, stored


def default_device() -> torch.device:
    """This process's CUDA device (LOCAL_RANK under torchrun) when there is one, else the CPU."""
    return (
        torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if torch.cuda.is_available() else torch.device("cpu")
    )


def load_model(cfg: ModelConfig) -> ModelAdapter:
    if cfg.block_size < 0:  # the tiny model: a block model when > 0; a folder: its own block size (daca_adapter.json)
        raise ConfigError(f"model.block_size={cfg.block_size} must be 0 (full attention) or a block length")
    if cfg.name == "tiny":
        tok = build_char_tokenizer()
        model = build_tiny_model(cfg, tok).to(pick(DTYPES, cfg.dtype, "model.dtype"))
        return ModelAdapter(
            model, tok, tok.mask_token_id, tok.eos_token_id, tok.pad_token_id, source="tiny", block_size=cfg.block_size
        )
    adapter = load_pretrained(cfg.name, cfg.trust_remote_code, cfg.dtype)
    if cfg.block_size and cfg.block_size != adapter.block_size:  # 0: the folder's own
        raise ConfigError(f"model.block_size={cfg.block_size}, but {cfg.name} has block size {adapter.block_size}")
    return adapter


def load_checkpoint(name: str, trust_remote_code: bool = False, dtype: str = "float32", base: str = "") -> ModelAdapter:
    """`load_model` plus LoRA adapter folders (adapter_config.json): the base model with the adapter merged in."""
    folder = Path(name)
    if not (folder / "adapter_config.json").exists():
        return load_model(ModelConfig(name=name, trust_remote_code=trust_remote_code, dtype=dtype))
    from peft import PeftModel

    base = base or json.loads((folder / "adapter_config.json").read_text()).get("base_model_name_or_path") or ""
    if not base:
        raise ValueError(f"{name} is a LoRA adapter that does not name its base model; pass the base (--base)")
    adapter = load_model(ModelConfig(name=base, trust_remote_code=trust_remote_code, dtype=dtype))
    model = PeftModel.from_pretrained(adapter.model, str(folder)).merge_and_unload()
    return ModelAdapter(
        model,
        adapter.tokenizer,
        adapter.mask_token_id,
        adapter.eos_token_id,
        adapter.pad_token_id,
        adapter.shift_logits,
        source=name,
        block_size=adapter.block_size,
    )


def count_parameters(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
