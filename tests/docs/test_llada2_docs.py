"""docs/paper-presets.md's LLaDA2.0 memory table is memory_table(m=LLADA2_MINI) row for row, and the preset it
describes decodes blocks of the model's own size."""

from daca_bench.config import RLConfig, load_config
from daca_bench.engine.memory import LLADA2_MINI, memory_table

from repo_paths import ROOT


def test_the_llada2_memory_table_is_its_formula():
    text = (ROOT / "docs/paper-presets.md").read_text()
    section = text.split("### LLaDA2.0", 1)[1].split("\n## ", 1)[0]
    rows = memory_table(m=LLADA2_MINI)
    assert len(rows) == 4 and all(row in section for row in rows)
    assert memory_table()[0] not in section  # LLaDA-8B's rows differ: the check can fail


def test_the_llada2_preset_decodes_the_models_blocks():
    from daca_bench.archs import LLaDA2MoeConfig

    cfg = load_config(ROOT / "configs/paper/llada2_gsm8k.yaml", [], RLConfig)
    assert cfg.rollout.block_length == cfg.eval.block_length == LLaDA2MoeConfig().block_size
    assert cfg.train.lora_target_modules == "query_key_value,dense"
