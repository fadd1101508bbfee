"""Protocols declared per task (issue 54 item 3): `gsm8k` and `math500` under protocol `d1` are what the
retired tasks `gsm8k_d1` / `math500_d1` were, byte for byte: prompts, targets, metadata and d1's rewards
and verdicts, against tests/fixtures/d1_prompts.json (rendered from those tasks before they were retired)."""

import json

import pytest

from daca_bench.errors import ConfigError, UnknownTaskError
from daca_bench.registry import get_task, task_protocols

from repo_paths import FIXTURES as FIX

EXPECTED = json.loads((FIX / "d1_prompts.json").read_text())


@pytest.mark.parametrize("key", sorted(EXPECTED))
def test_a_task_under_d1_renders_what_its_retired_d1_copy_rendered(key):
    old, split = key.split("/")
    name = old.removesuffix("_d1")
    kw = {"shaping": "d1"} if split == "train" else {}
    task = get_task(name, split=split, protocol="d1", path=FIX / f"{name}.jsonl", **kw)
    assert task.name == name and len(task.samples) >= len(EXPECTED[key])
    for s, want in zip(task.samples, EXPECTED[key]):
        assert s.id == want["id"].replace(old + "/", name + "/", 1)
        assert (s.prompt, s.target, s.metadata) == (want["prompt"], want["target"], want["metadata"])
        for scored in want["rewards"]:
            r = task.verify(s, scored["reply"])
            got = json.loads(
                json.dumps({"value": r.value, "status": r.status, "details": dict(r.details)}, default=str)
            )
            assert got == {k: scored[k] for k in ("value", "status", "details")}, scored["reply"]


def test_the_plain_task_is_not_posed_and_a_protocol_it_lacks_is_one_line():
    plain = get_task("gsm8k", split="test", path=FIX / "gsm8k.jsonl")
    assert plain.samples[0].prompt.startswith("Solve the problem.") and "prefill" not in plain.samples[0].metadata
    assert "d1" in task_protocols("gsm8k") and "d1" in task_protocols("math500")
    assert task_protocols("arithmetic") == ()
    with pytest.raises(ConfigError, match="declares no protocol 'd1'"):
        get_task("arithmetic", protocol="d1")


@pytest.mark.parametrize("old,new", [("gsm8k_d1", "gsm8k"), ("math500_d1", "math500")])
def test_a_retired_d1_task_name_says_what_replaces_it(old, new):
    with pytest.raises(UnknownTaskError, match=f"now '{new}' under protocol 'd1'.*train.protocol=d1"):
        get_task(old)


def test_a_users_d1_wording_written_for_the_retired_name_still_applies(tmp_path, monkeypatch):
    table = tmp_path / "prompts.json"
    table.write_text(json.dumps({"gsm8k_d1": {"test": "THEIR WORDS"}, "math500": {"test": "NEW KEY"}}))
    monkeypatch.setenv("DACA_BENCH_D1_PROMPTS", str(table))
    assert get_task("gsm8k", protocol="d1", path=FIX / "gsm8k.jsonl").samples[0].prompt.startswith("THEIR WORDS\n\n")
    assert get_task("math500", protocol="d1", path=FIX / "math500.jsonl").samples[0].prompt.startswith("NEW KEY\n\n")


def test_train_protocol_poses_the_rl_train_and_test_sets_as_the_retired_task_did(monkeypatch):
    from daca_bench.config import RLConfig, apply
    from daca_bench.loaders import DATA_FILES_ENV
    from daca_bench.registry import test_set
    from daca_bench.train.trainer import training_task

    monkeypatch.setenv(DATA_FILES_ENV, str(FIX / "gsm8k.jsonl"))
    cfg = apply(RLConfig(), {"train.task": "gsm8k", "train.protocol": "d1", "train.reward": "d1"})
    train, test = training_task(cfg), test_set(cfg.train)
    want_train, want_test = EXPECTED["gsm8k_d1/train"], EXPECTED["gsm8k_d1/test"]
    assert [s.prompt for s in train.samples[:3]] == [w["prompt"] for w in want_train]
    assert {s.prompt for s in test.samples} >= {w["prompt"] for w in want_test}
    s = train.samples[0]
    assert train.verify(s, want_train[0]["rewards"][0]["reply"]).value == want_train[0]["rewards"][0]["value"]
    plain = apply(RLConfig(), {"train.task": "gsm8k"})
    assert not {s.prompt for s in test_set(plain.train).samples} & {w["prompt"] for w in want_test}


def test_tasks_show_renders_a_task_under_a_protocol(capsys):
    from daca_bench.cli import main

    assert (
        main(
            ["tasks", "--show", "gsm8k", "--protocol", "d1", "--fixture", str(FIX / "gsm8k.jsonl"), "-n", "1", "--json"]
        )
        == 0
    )
    row = json.loads(capsys.readouterr().out.splitlines()[0])
    assert row["prompt"] == EXPECTED["gsm8k_d1/test"][0]["prompt"]
    assert main(["tasks", "--check", "gsm8k", "--protocol", "d1"]) == 2  # --protocol goes with --show
