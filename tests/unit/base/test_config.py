import pytest

from daca_bench.config import (
    ConfigError,
    RunConfig,
    apply,
    load_config,
    parse_overrides,
)


def test_dotted_overrides_are_typed():
    cfg = load_config(
        None, ["sft.lr=3e-4", "sampler.steps=16", "sampler.threshold=0.9", "model.trust_remote_code=true"]
    )
    assert cfg.sft.lr == 3e-4 and cfg.sampler.steps == 16 and cfg.sampler.threshold == 0.9
    assert cfg.model.trust_remote_code is True
    assert load_config(None, ["sampler.threshold=null"]).sampler.threshold is None


def test_unknown_key_names_close_matches():
    with pytest.raises(ConfigError, match=r"sft\.lr"):
        load_config(None, ["sft.lrr=1"])
    with pytest.raises(ConfigError, match=r"sampler\.temperature"):
        load_config(None, ["temperature=0.9"])  # the right leaf in the wrong section


def test_bad_values_are_errors():
    with pytest.raises(ConfigError, match="expected int"):
        load_config(None, ["sampler.steps=1.5"])
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        parse_overrides(["sft.lr"])
    with pytest.raises(ConfigError, match="is a section"):
        apply(RunConfig(), {"sft": 3})


def test_yaml_preset_with_unknown_key_names_the_file(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("sft:\n  stepz: 3\n")
    with pytest.raises(ConfigError, match=r"bad.yaml.*sft\.steps"):
        load_config(path)


def test_shipped_tiny_preset_loads():
    cfg = load_config("configs/tiny_sft.yaml")
    assert cfg.model.name == "tiny" and cfg.sft.task == "arithmetic"


def test_print_config_names_every_choice_of_each_named_key():
    from daca_bench.config import RLConfig
    from daca_bench.confighelp import describe
    from daca_bench.engine.runtime import PRECISIONS
    from daca_bench.rl.credit import NORMS, SCORES
    from daca_bench.rl.losses import AGGREGATIONS, LOSSES
    from daca_bench.rl.strata import STRATA
    from daca_bench.train.trainer import REWARDS

    helps = {key: help_ for key, _, help_ in describe(RLConfig())}
    tables = {
        "sml.partition": STRATA,
        "dps.score": SCORES,
        "dps.norm": NORMS,
        "loss.base": LOSSES,
        "loss.loss_type": AGGREGATIONS,
        "train.precision": PRECISIONS,
        "train.reward": REWARDS,
    }
    for key, table in tables.items():
        missing = [name for name in table if name not in helps[key]]
        assert not missing, f"{key}'s help does not name {missing}"
