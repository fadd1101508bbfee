import json
import re
import textwrap

import pytest
import torch

from daca_bench.chars import build_char_tokenizer
from daca_bench.config import ModelConfig
from daca_bench.models import (
    count_parameters,
    load_model,
    load_pretrained,
)


def test_tiny_model_is_a_real_transformers_masked_lm(tiny):
    from transformers import BertForMaskedLM

    assert isinstance(tiny.model, BertForMaskedLM)
    assert 0.5e6 < count_parameters(tiny.model) < 1.5e6
    ids = torch.tensor([tiny.encode(["12+5=7"])[0]])
    assert tiny.logits(ids, torch.ones_like(ids)).shape == (1, 6, len(tiny.tokenizer))


def test_char_tokenizer_round_trips_and_has_single_id_specials():
    tok = build_char_tokenizer()
    text = 'def f(x):\n    return {"a": [1, -2.5]}  # ok'
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert len(ids) == len(text) and tok.decode(ids) == text
    for special in (tok.mask_token, tok.eos_token, tok.pad_token):
        assert len(tok(special, add_special_tokens=False)["input_ids"]) == 1
    assert len({tok.mask_token_id, tok.eos_token_id, tok.pad_token_id}) == 3


def test_saved_tiny_model_loads_with_same_logits(tiny, tmp_path):
    tiny.save(tmp_path / "m")
    again = load_model(ModelConfig(name=str(tmp_path / "m")))
    ids = torch.tensor([tiny.encode(["3+4="])[0] + [tiny.mask_token_id] * 4])
    attn = torch.ones_like(ids)
    assert torch.allclose(tiny.logits(ids, attn), again.logits(ids, attn), atol=1e-6)
    assert (again.mask_token_id, again.eos_token_id) == (tiny.mask_token_id, tiny.eos_token_id)


def test_hub_style_masked_lm_loads_through_automodel(tmp_path):
    """A ModernBERT masked LM saved to disk loads through the same code a hub id takes."""
    from transformers import ModernBertConfig, ModernBertForMaskedLM

    tok = build_char_tokenizer()
    cfg = ModernBertConfig(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        pad_token_id=tok.pad_token_id,
        mask_token_id=tok.mask_token_id,
        eos_token_id=tok.eos_token_id,
        bos_token_id=tok.eos_token_id,
        cls_token_id=tok.eos_token_id,
        sep_token_id=tok.eos_token_id,
        max_position_embeddings=64,
    )
    ModernBertForMaskedLM(cfg).save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    adapter = load_pretrained(str(tmp_path))
    ids = torch.tensor([tok("1+1=", add_special_tokens=False)["input_ids"] + [tok.mask_token_id] * 4])
    assert adapter.logits(ids, torch.ones_like(ids)).shape == (1, 8, len(tok))
    assert adapter.mask_token_id == tok.mask_token_id and not adapter.shift_logits


REMOTE_CONFIG = """
from transformers import PretrainedConfig
class ToyDreamConfig(PretrainedConfig):
    model_type = "toy_dream"
    def __init__(self, vocab_size=100, hidden=16, mask_token_id=None, **kw):
        self.vocab_size, self.hidden = vocab_size, hidden
        super().__init__(mask_token_id=mask_token_id, **kw)
"""
REMOTE_MODEL = """
import torch
from transformers import PreTrainedModel
from transformers.modeling_outputs import MaskedLMOutput
from .configuration_toy import ToyDreamConfig
class ToyDreamModel(PreTrainedModel):
    config_class = ToyDreamConfig
    def __init__(self, config):
        super().__init__(config)
        self.emb = torch.nn.Embedding(config.vocab_size, config.hidden)
        self.out = torch.nn.Linear(config.hidden, config.vocab_size)
        self.post_init()
    def forward(self, input_ids, attention_mask=None, **kw):
        return MaskedLMOutput(logits=self.out(self.emb(input_ids)))
"""


@pytest.mark.parametrize("model_type,shifted", [("toy_dream", True), ("toy_llada", False)])
def test_remote_code_models_load_with_mask_id_from_config(tmp_path, model_type, shifted):
    """LLaDA / Dream ship their own code: the loader needs trust_remote_code and handles Dream's shift."""
    (tmp_path / "configuration_toy.py").write_text(REMOTE_CONFIG.replace("toy_dream", model_type))
    (tmp_path / "modeling_toy.py").write_text(textwrap.dedent(REMOTE_MODEL))
    tok = build_char_tokenizer()
    tok.save_pretrained(tmp_path)
    cfg = {
        "model_type": model_type,
        "vocab_size": len(tok),
        "hidden": 16,
        "mask_token_id": 7,
        "eos_token_id": tok.eos_token_id,
        "auto_map": {"AutoConfig": "configuration_toy.ToyDreamConfig", "AutoModel": "modeling_toy.ToyDreamModel"},
    }
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    from transformers import AutoConfig, AutoModel

    model = AutoModel.from_config(AutoConfig.from_pretrained(tmp_path, trust_remote_code=True), trust_remote_code=True)
    model.save_pretrained(tmp_path)
    tcfg = json.loads((tmp_path / "tokenizer_config.json").read_text())
    tcfg.pop("mask_token", None)  # mask id must then come from the model config, as LLaDA's does
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(tcfg))
    with pytest.raises(ValueError, match="trust_remote_code"):
        load_pretrained(str(tmp_path))
    adapter = load_pretrained(str(tmp_path), trust_remote_code=True)
    assert adapter.mask_token_id == 7 and adapter.shift_logits is shifted
    ids = torch.tensor([[10, 11, 12, 13]])
    raw = adapter.model(input_ids=ids).logits
    got = adapter.logits(ids, torch.ones_like(ids))
    expected = torch.cat([raw[:, :1], raw[:, :-1]], 1) if shifted else raw
    assert torch.allclose(got, expected)


def test_missing_weights_name_a_download_command_that_exists():
    from importlib.metadata import entry_points

    from daca_bench.models import require_available

    with pytest.raises(RuntimeError, match=r"`hf download no-such-org/no-such-model`") as info:
        require_available(ModelConfig(name="no-such-org/no-such-model"))
    command = re.search(r"`(\S+) download", str(info.value))[1]
    assert command in {
        ep.name for ep in entry_points(group="console_scripts") if ep.value.startswith("huggingface_hub")
    }
