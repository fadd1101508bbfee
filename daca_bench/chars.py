"""The tiny model's character tokenizer: one id per printable ASCII character and newline, and
single-id [PAD], [MASK], [EOS], [UNK], built offline with `tokenizers` (no download).

    tok = build_char_tokenizer()          # [PAD] [MASK] [EOS] [UNK] + one id per character
    tok("12+5=")["input_ids"]             # one id per character

The prompts a model reads (chat template, prefill, the cut to the last N tokens) are
daca_bench.eval.prompts's.
"""

from __future__ import annotations

import string

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
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token=PAD,
        mask_token=MASK,
        eos_token=EOS,
        unk_token=UNK,
        clean_up_tokenization_spaces=False,
    )
    tok.model_input_names = ["input_ids", "attention_mask"]
    return tok
