"""The text side of a model: the tiny model's character tokenizer, and the prompts a model sees
(a user message of its chat template, the sample's prefill, a cut to the last N tokens, as d1 does).

    tok = build_char_tokenizer()                               # [PAD] [MASK] [EOS] [UNK] + one id per character
    texts = task_prompts(adapter, samples, chat=True, max_tokens=200)

daca_bench.models re-exports every name here (callers import them from either).
"""
from __future__ import annotations

import string
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .models import ModelAdapter

MASK, PAD, EOS, UNK = "[MASK]", "[PAD]", "[EOS]", "[UNK]"
TINY_CHARS = string.printable[:95] + "\n"  # printable ASCII (digits, letters, punctuation, space) and newline


def build_char_tokenizer(chars: str = TINY_CHARS):
    """A character-level fast tokenizer with single-id [PAD], [MASK], [EOS], [UNK]."""
    from tokenizers import Tokenizer, decoders, models
    from transformers import PreTrainedTokenizerFast

    specials = [PAD, MASK, EOS, UNK]
    vocab = {tok: i for i, tok in enumerate(specials + list(dict.fromkeys(chars)))}
    core = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token=UNK))  # no merges: one id per character
    core.decoder = decoders.Fuse()
    tok = PreTrainedTokenizerFast(tokenizer_object=core, pad_token=PAD, mask_token=MASK, eos_token=EOS,
                                  unk_token=UNK, clean_up_tokenization_spaces=False)
    tok.model_input_names = ["input_ids", "attention_mask"]
    return tok


def chat_prompts(adapter: ModelAdapter, prompts: list[str], prefills: list[str] | None = None) -> list[str]:
    """Each prompt as one user message through the tokenizer's chat template, generation prompt
    added (d1), then its prefill: the start of the answer written for the model (d1's evaluation
    prompts end in `<reasoning>`)."""
    if not getattr(adapter.tokenizer, "chat_template", None):
        raise ValueError(f"{adapter.source}: the tokenizer has no chat template; set train.chat_template=false")
    prefills = prefills or [""] * len(prompts)
    return [adapter.tokenizer.apply_chat_template([{"role": "user", "content": p}], tokenize=False,
                                                  add_generation_prompt=True) + f for p, f in zip(prompts, prefills)]


def task_prompts(adapter: ModelAdapter, samples, chat: bool, max_tokens: int = 0) -> list[str]:
    """The prompts the model sees for these samples: each prompt (with `chat`: one user message of
    the chat template) followed by the sample's prefill (metadata["prefill"]: d1's `<reasoning>`); with
    `max_tokens`, cut to their last max_tokens tokens (d1 keeps the last 200 of a training prompt)."""
    prefills = [str(s.metadata.get("prefill", "")) for s in samples]
    texts = chat_prompts(adapter, [s.prompt for s in samples], prefills) if chat else \
        [s.prompt + f for s, f in zip(samples, prefills)]
    return [truncate_prompt(adapter, t, max_tokens) for t in texts] if max_tokens else texts


def truncate_prompt(adapter: ModelAdapter, text: str, max_tokens: int) -> str:
    """`text` cut from the left to at most max_tokens tokens. The result encodes to exactly a
    suffix of text's tokens (a leading token that would not decode and re-encode alike is dropped too)."""
    ids = adapter.encode([text])[0]
    if len(ids) <= max_tokens:
        return text
    for start in range(len(ids) - max_tokens, len(ids)):
        cut = adapter.tokenizer.decode(ids[start:], skip_special_tokens=False)
        if adapter.encode([cut])[0] == ids[start:]:
            return cut
    return ""
