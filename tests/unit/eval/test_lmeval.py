"""lm-evaluation-harness backend (issue 46): lm_eval model `daca` runs a local generation task and a local
multiple-choice task on the tiny model, offline; its loglikelihood is LLaDA's Monte Carlo ELBO, checked
against a hand computation on a fixed seed; stop strings cut the generated text; CFG; one-line errors."""

import json
import math

import pytest
import torch

lm_eval = pytest.importorskip("lm_eval", reason="lm-eval is not installed (pip install 'daca-bench[lmeval]')")

from lm_eval.api.instance import Instance  # noqa: E402

from daca_bench.cli import main  # noqa: E402
from daca_bench.config import SamplerConfig  # noqa: E402
from daca_bench.errors import ConfigError  # noqa: E402
from daca_bench.eval.lmeval import DacaLM, Guided, cut_at_stops, request_key  # noqa: E402
from daca_bench.rl.sampler import sample  # noqa: E402
from daca_bench.rl.strata import keyed_generator  # noqa: E402

from repo_paths import ROOT  # noqa: E402

TASK = """task: {name}
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: {kind}
doc_to_text: "{{{{question}}}}"
doc_to_target: "{target}"
{extra}
metric_list:
  - metric: {metric}
"""


def write_tasks(folder):
    """A generation task and a multiple-choice task: two YAML files and their JSONL data."""
    gen, mc = folder / "gen.jsonl", folder / "mc.jsonl"
    gen.write_text("".join(json.dumps({"question": f"{i}+{i}=", "answer": str(2 * i)}) + "\n" for i in range(3)))
    mc.write_text(
        "".join(
            json.dumps({"question": f"{i}+1=", "choices": [str(i + 1), str(i + 7)], "label": 0}) + "\n"
            for i in range(3)
        )
    )
    (folder / "gen.yaml").write_text(
        TASK.format(
            name="daca_local_gen",
            data=gen,
            kind="generate_until",
            target="{{answer}}",
            metric="exact_match",
            extra='generation_kwargs:\n  until: ["\\n"]',
        )
    )
    (folder / "mc.yaml").write_text(
        TASK.format(
            name="daca_local_mc",
            data=mc,
            kind="multiple_choice",
            target="{{label}}",
            metric="acc",
            extra='doc_to_choice: "{{choices}}"',
        )
    )


def test_lm_eval_runs_a_local_generation_and_a_multiple_choice_task_on_tiny(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    write_tasks(tmp_path)
    out = tmp_path / "out"
    assert (
        main(
            [
                "lm-eval",
                "--model",
                "daca",
                "--model_args",
                "model=tiny,gen_length=8,steps=8,mc_num=4,mc_batch=8",
                "--tasks",
                "daca_local_gen,daca_local_mc",
                "--include_path",
                str(tmp_path),
                "--batch_size",
                "4",
                "--output_path",
                str(out),
                "--log_samples",
            ]
        )
        == 0
    )
    results = json.loads(next(out.rglob("results_*.json")).read_text())["results"]
    assert set(results) == {"daca_local_gen", "daca_local_mc"}
    assert 0.0 <= results["daca_local_mc"]["acc,none"] <= 1.0
    gen = [json.loads(x) for x in next(out.rglob("samples_daca_local_gen_*.jsonl")).read_text().splitlines()]
    mc = [json.loads(x) for x in next(out.rglob("samples_daca_local_mc_*.jsonl")).read_text().splitlines()]
    assert len(gen) == 3 and all("\n" not in r["resps"][0][0] for r in gen)  # cut at the stop string
    assert len(mc) == 3 and all(
        len(r["resps"]) == 2 and float(r["resps"][0][0][0]) < 0 for r in mc
    )  # an ELBO per choice


def test_generate_until_is_the_samplers_text_cut_at_the_first_stop_string():
    lm = DacaLM(model="tiny", gen_length=16, steps=8, batch_size=2)
    prompts = ["12+5=", "3*4=", "7-2="]
    full = sample(lm.adapter, prompts, lm.sampler, seed=0, record=False).texts
    stops = [full[0][3:5], full[1][1], "never there"]  # strings the completions hold (and one they do not)
    got = lm.generate_until(
        [Instance("generate_until", {}, (p, {"until": [s, "zzz"]}), i) for i, (p, s) in enumerate(zip(prompts, stops))]
    )
    assert got == [full[0][: full[0].index(stops[0])], full[1][: full[1].index(stops[1])], full[2]]
    assert cut_at_stops("a;b.c", [".", ";"]) == "a" and cut_at_stops("abc", None) == "abc"


def hand_elbo(adapter, context: str, continuation: str, draws: int, seed: int) -> float:
    """LLaDA's ELBO by hand: per draw l ~ U{1..L} continuation tokens masked (the request's keyed
    generator), the masked tokens' log-softmax of the target summed with weight L / l, mean over draws."""
    ctx = adapter.encode([context])[0]
    cont = adapter.encode([context + continuation])[0][len(ctx) :]
    L, total = len(cont), 0.0
    for d in range(draws):
        gen = keyed_generator(seed, "elbo", request_key(context, continuation), d)
        n_masked = int(torch.randint(1, L + 1, (1,), generator=gen))
        masked = torch.randperm(L, generator=gen)[:n_masked]
        noisy = torch.tensor(cont)
        noisy[masked] = adapter.mask_token_id
        ids = torch.cat([torch.tensor(ctx, dtype=torch.long), noisy])[None]
        with torch.no_grad():
            logits = adapter.model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits[0, len(ctx) :].double()
        logp = torch.log_softmax(logits, -1)[torch.arange(L), torch.tensor(cont)]
        total += float((L / n_masked) * logp[masked].sum())
    return total / draws


def test_loglikelihood_is_llada_s_elbo_computed_by_hand():
    lm = DacaLM(model="tiny", mc_num=6, mc_batch=4, seed=3, batch_size=3)
    reqs = [("12+5=", "17"), ("Q: 2+2? A:", " 4"), ("", "hello")]
    got = lm.loglikelihood([Instance("loglikelihood", {}, r, i) for i, r in enumerate(reqs)])
    for (context, cont), (ll, greedy) in zip(reqs, got):
        assert ll == pytest.approx(hand_elbo(lm.adapter, context, cont, 6, 3), abs=1e-5) and greedy is False
    one = DacaLM(model="tiny", mc_num=6, mc_batch=4, seed=3, batch_size=1)  # masks keyed per request, not per batch
    assert [x for x, _ in one.loglikelihood([Instance("loglikelihood", {}, reqs[1], 0)])] == pytest.approx(
        [got[1][0]], abs=1e-5
    )
    rolling = lm.loglikelihood_rolling([Instance("loglikelihood_rolling", {}, ("hello",), 0)])
    assert rolling == pytest.approx([got[2][0]], abs=1e-5)


def test_classifier_free_guidance_and_the_greedy_check():
    lm = DacaLM(model="tiny", mc_num=2, greedy_check=True)
    ids = torch.tensor([[5, 6, 7, 8, 9]])
    plain = lm.adapter.logits(ids, torch.ones_like(ids))
    assert torch.allclose(Guided(lm.adapter, 2, 0.0).logits(ids, torch.ones_like(ids)), plain, atol=1e-5)
    un = lm.adapter.logits(torch.tensor([[lm.adapter.mask_token_id] * 2 + [7, 8, 9]]), torch.ones_like(ids))
    assert torch.allclose(
        Guided(lm.adapter, 2, 1.5).logits(ids, torch.ones_like(ids)), un + 2.5 * (plain - un), atol=1e-4
    )
    guided = DacaLM(model="tiny", mc_num=2, cfg=1.5)
    req = Instance("loglikelihood", {}, ("12+5=", "17"), 0)
    assert guided.loglikelihood([req])[0][0] != lm.loglikelihood([req])[0][0]
    ctx = lm.adapter.encode(["12+5="])[0]
    greedy = sample(lm.adapter, [ctx], SamplerConfig(gen_length=3, block_length=3, steps=3), record=False)
    ids = greedy.completion_ids[0].tolist()
    assert lm._is_greedy(ctx, ids) is True and lm._is_greedy(ctx, [ids[0], ids[1], (ids[2] + 1) % 90 + 4]) is False


def test_bad_model_args_are_one_line_errors(tmp_path, capsys, monkeypatch):
    with pytest.raises(ConfigError, match="unknown model_args colour"):
        DacaLM(model="tiny", colour="red")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    write_tasks(tmp_path)
    assert (
        main(
            [
                "lm-eval",
                "--model",
                "daca",
                "--model_args",
                "model=tiny,mc_num=0",
                "--tasks",
                "daca_local_mc",
                "--include_path",
                str(tmp_path),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("daca-bench lm-eval:") and "mc_num=0 must be at least 1" in err[-1]


@pytest.mark.slow
def test_two_gloo_processes_give_the_results_of_one(tmp_path):
    """lm_eval hands rank r the documents r::world; the ELBO's masks are keyed per request and decoding is
    greedy, so two processes score every document as one process does, and rank 0 writes them."""
    import os
    import socket
    import subprocess
    import sys

    write_tasks(tmp_path)
    root = ROOT
    env = {**os.environ, "PYTHONPATH": str(root), "OMP_NUM_THREADS": "1", "HF_DATASETS_OFFLINE": "1"}
    samples = {}
    for nproc in (1, 2):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        launch = (
            [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(port)]
            if nproc == 2
            else [sys.executable]
        )
        out = tmp_path / f"out{nproc}"
        done = subprocess.run(
            [
                *launch,
                "-m",
                "daca_bench",
                "lm-eval",
                "--model",
                "daca",
                "--model_args",
                "model=tiny,gen_length=8,steps=8,mc_num=4",
                "--tasks",
                "daca_local_gen,daca_local_mc",
                "--include_path",
                str(tmp_path),
                "--output_path",
                str(out),
                "--log_samples",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        # each request's first response (lm_eval repeats a request to even out the ranks' counts)
        samples[nproc] = {
            p.name.split("_2")[0]: sorted(
                (json.loads(x)["doc_id"], json.dumps([r[0] for r in json.loads(x)["resps"]]))
                for x in p.read_text().splitlines()
            )
            for p in out.rglob("samples_*.jsonl")
        }
        samples[nproc]["results"] = json.loads(next(out.rglob("results_*.json")).read_text())["results"]
    assert set(samples[1]) == {"samples_daca_local_gen", "samples_daca_local_mc", "results"}
    assert samples[2] == samples[1] and len(samples[1]["samples_daca_local_mc"]) == 3


@pytest.mark.parametrize("family", ["llada", "dream"])
def test_the_native_llada_and_dream_classes_and_a_saved_folder_serve_both_request_kinds(family, tmp_path):
    import math

    from daca_bench.config import ModelConfig
    from daca_bench.models import load_model
    from daca_bench.testing import write_paper_folder

    folders = [write_paper_folder(family, tmp_path / family, compact=True)]
    if family == "llada":  # a folder of ours (what SFT writes as final/)
        load_model(ModelConfig(name="tiny")).save(tmp_path / "ours")
        folders.append(tmp_path / "ours")
    for folder in folders:
        lm = DacaLM(model=str(folder), gen_length=8, steps=8, mc_num=2, batch_size=2)
        assert type(lm.adapter.model).__module__.startswith("daca_bench.archs") == (folder.name == family)
        text = lm.generate_until([Instance("generate_until", {}, ("Hello there", {"until": ["zzz"]}), 0)])
        ll = lm.loglikelihood([Instance("loglikelihood", {}, ("Hello", " world"), 0)])
        assert isinstance(text[0], str) and math.isfinite(ll[0][0]) and ll[0][0] < 0


# ---- issue 59: the backend honours lm_eval's request and model settings ----------------------------
def gen(context: str, **kw) -> Instance:
    return Instance("generate_until", {}, (context, {"until": ["zzz"], **kw}), 0)


def test_gen_kwargs_set_the_canvas_the_temperature_and_the_stops():
    lm = DacaLM(model="tiny", gen_length=16, block_length=8, steps=8, batch_size=2)
    short = lm.request_sampler({"max_gen_toks": 4, "until": "\n"})
    assert (short[0].gen_length, short[0].block_length, short[0].steps, short[1]) == (
        4,
        4,
        2,
        ["\n"],
    )  # 2 tokens a step
    cfg = lm.request_sampler({"max_gen_toks": 24})[0]
    assert (cfg.gen_length, cfg.block_length, cfg.steps) == (24, 8, 12)
    assert lm.request_sampler({"temperature": 0.9, "do_sample": True})[0].temperature == 0.9
    assert lm.request_sampler({"temperature": 0.9, "do_sample": False})[0].temperature == 0.0  # lm_eval: greedy
    assert lm.request_sampler({})[0] == lm.sampler  # nothing asked: the model_args' sampler
    with pytest.raises(ConfigError, match="do_sample=true needs temperature > 0"):
        lm.request_sampler({"do_sample": True})
    prompts = ["12+5=", "3*4=", "7-2=", "9+9="]
    plain = lm.generate_until([gen(p) for p in prompts])
    two = lm.generate_until([gen(p, max_gen_toks=2) for p in prompts])
    assert all(len(lm.adapter.encode([t])[0]) <= 2 for t in two) and two != plain
    hot = lm.generate_until([gen(p, temperature=5.0, do_sample=True) for p in prompts])
    assert hot != plain


def test_sampled_rows_do_not_depend_on_the_batch():
    prompts = ["12+5=", "3*4=", "7-2=", "9+9=", "1+1="]
    reqs = [gen(p, temperature=0.9, do_sample=True) for p in prompts] + [
        gen(prompts[0], temperature=0.9, do_sample=True)
    ]
    rows = {b: DacaLM(model="tiny", gen_length=8, steps=8, batch_size=b).generate_until(reqs) for b in (1, 4)}
    assert rows[1] == rows[4]
    assert rows[1][0] != rows[1][5] or rows[1][1:5] != [rows[1][0]] * 4  # a repeat of a request draws anew


def test_batch_size_from_either_place_and_auto_refused(tmp_path, capsys, monkeypatch):
    lm = DacaLM.create_from_arg_string("model=tiny,batch_size=3", {"batch_size": 1, "device": None})
    assert lm.batch_size == 3 and lm.sampler.batch_size == 3  # model_args win over --batch_size
    assert DacaLM.create_from_arg_string("model=tiny", {"batch_size": "2"}).batch_size == 2
    with pytest.raises(ConfigError, match="does not measure `auto`"):
        DacaLM(model="tiny", batch_size="auto")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    assert main(["lm-eval", "--model_args", "model=tiny", "--tasks", "daca_mc_local", "--batch_size", "auto"]) == 2
    assert "does not measure `auto`" in capsys.readouterr().err.strip().splitlines()[-1]


def test_contexts_longer_than_the_model_are_left_truncated():
    lm = DacaLM(model="tiny", gen_length=8, steps=8, mc_num=2, batch_size=2)
    limit = lm.max_length
    assert limit and limit < 200
    long = "1+2+3+4+5+6+7+8+9=" * 20  # far more tokens than tiny's positions
    tail = lm.adapter.encode([long])[0][-(limit - 8) :]
    got = lm.generate_until([gen(long)])
    cfg = lm.request_sampler({"until": ["zzz"]})[0]
    expect = sample(lm.adapter, [tail], cfg, seed=[0], record=False).texts[0]  # greedy: the seed does not matter
    assert got == [lm._plain(expect)]
    ((ll, _),) = lm.loglikelihood([Instance("loglikelihood", {}, (long, "17"), 0)])
    ctx, cont = lm._encode_pair(long, "17")
    assert len(ctx) + len(cont) == limit and math.isfinite(ll)
    small = DacaLM(model="tiny", mc_num=2, max_length=6)
    text = "hello world this is a long line of text"
    assert len(small.adapter.encode([text])[0]) > 6
    rolled = small.loglikelihood_rolling([Instance("loglikelihood_rolling", {}, (text,), 0)])
    assert math.isfinite(rolled[0]) and rolled[0] < 0  # summed over disjoint windows of 6 tokens


def test_cfg_guides_generation_as_it_guides_the_likelihood():
    prompts = ["12+5=", "3*4=", "7-2=", "9+9="]
    plain = DacaLM(model="tiny", gen_length=8, steps=8, batch_size=4)
    guided = DacaLM(model="tiny", gen_length=8, steps=8, batch_size=4, cfg=3.0)
    got = guided.generate_until([gen(p) for p in prompts])
    ids = [guided.adapter.encode([p])[0] for p in prompts]
    by_hand = sample(Guided(guided.adapter, max(map(len, ids)), 3.0), ids, guided.sampler, record=False).texts
    assert got == [guided._plain(t) for t in by_hand] and got != plain.generate_until([gen(p) for p in prompts])
    with pytest.raises(ConfigError, match="guides the uncached passes only"):
        DacaLM(model="tiny", cfg=1.0, cache="prefix")


def test_lm_eval_defaults_to_daca_and_runs_the_shipped_local_tasks_offline(tmp_path, monkeypatch):
    from daca_bench.eval.localtasks import records

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    gsm, mc = records(4)
    assert all(r["answer"].endswith(f"#### {r['answer'].split()[-1]}") for r in gsm)
    assert all(r["choices"][r["label"]] == g["answer"].split()[-1] for r, g in zip(mc, gsm))
    out = tmp_path / "out"
    assert (
        main(
            [
                "lm-eval",
                "--model_args",
                "model=tiny,gen_length=8,steps=8,mc_num=2",
                "--tasks",
                "daca_gsm8k_local,daca_mc_local",
                "--limit",
                "3",
                "--output_path",
                str(out),
            ]
        )
        == 0
    )  # no --model
    results = json.loads(next(out.rglob("results_*.json")).read_text())["results"]
    assert (
        set(results) == {"daca_gsm8k_local", "daca_mc_local"}
        and "exact_match,strict-match" in results["daca_gsm8k_local"]
    )


# ---- issue 57: a block model through the backend ------------------------------------------------------
def hand_block_elbo(adapter, context: str, continuation: str, draws: int, seed: int, B: int) -> float:
    """The same draws as hand_elbo, each block of the continuation scored on a canvas of its own: the context,
    the clean blocks before it, its noisy tokens, masks after it (the continuation padded with masks to whole
    blocks, the padding never scored): what the clean stream computes in one pass (docs/method.md 12.9)."""
    ctx = adapter.encode([context])[0]
    cont = adapter.encode([context + continuation])[0][len(ctx) :]
    L = len(cont)
    full = torch.tensor(cont + [adapter.mask_token_id] * (-L % B))
    total = 0.0
    for d in range(draws):
        gen = keyed_generator(seed, "elbo", request_key(context, continuation), d)
        n_masked = int(torch.randint(1, L + 1, (1,), generator=gen))
        masked = torch.zeros(len(full), dtype=torch.bool)
        masked[torch.randperm(L, generator=gen)[:n_masked]] = True
        for lo in range(0, len(full), B):
            canvas = full.clone()
            canvas[lo:][masked[lo:] | (torch.arange(len(full))[lo:] >= lo + B)] = adapter.mask_token_id
            canvas[L:] = adapter.mask_token_id
            ids = torch.cat([torch.tensor(ctx, dtype=torch.long), canvas])[None]
            with torch.no_grad():
                logits = adapter.logits(ids, torch.ones_like(ids))[0, len(ctx) :].double()
            for k in range(lo, min(lo + B, L)):
                if masked[k]:
                    total += float((L / n_masked) * torch.log_softmax(logits[k], -1)[cont[k]])
    return total / draws


def test_a_block_model_s_requests(tmp_path):
    from daca_bench.config import ModelConfig
    from daca_bench.models import load_model

    folder = tmp_path / "block"
    load_model(ModelConfig(seed=0, block_size=4)).save(folder)
    lm = DacaLM(model=str(folder), gen_length=8, mc_num=4, mc_batch=4, seed=3, batch_size=2, greedy_check=True)
    assert (lm.sampler.block_length, lm.block) == (4, 4)
    reqs = [("12+5=", "17"), ("Q: 2+2? A:", " four"), ("3*4=", "12.0")]  # 2, 5 and 4 tokens: padded to 4, 8, 4
    got = lm.loglikelihood([Instance("loglikelihood", {}, r, i) for i, r in enumerate(reqs)])
    for (context, cont), (ll, _) in zip(reqs, got):
        assert ll == pytest.approx(hand_block_elbo(lm.adapter, context, cont, 4, 3, 4), abs=1e-4)
    ctx = lm.adapter.encode(["12+5="])[0]
    cfg = SamplerConfig(gen_length=4, block_length=4, steps=4, temperature=0.0)
    ids = sample(lm.adapter, [ctx], cfg, seed=0, record=False).completion_ids[0].tolist()
    assert lm._is_greedy(ctx, ids[:3]) is True and lm._is_greedy(ctx, ids[:2] + [(ids[2] + 1) % 90 + 4]) is False
    cfg, _, keep = lm.request_sampler({"max_gen_toks": 6})
    assert (cfg.gen_length, cfg.block_length, keep) == (8, 4, 6)  # whole blocks, cut back to 6 tokens
    texts = lm.generate_until([gen("12+5=", max_gen_toks=6), gen("3*4=", max_gen_toks=8)])
    assert len(lm.adapter.encode([texts[0]])[0]) <= 6
    short = DacaLM(model=str(folder), gen_length=4, max_length=10)
    ctx, cont = short._encode_pair("12345678+9=", "17")  # 2 tokens, scored as a block of 4: 6 left for the context
    assert (len(ctx), len(cont)) == (6, 2) and short.loglikelihood_rolling([Instance("r", {}, ("1234567890" * 3,), 0)])
    with pytest.raises(ConfigError, match="block_length must be 4"):
        DacaLM(model=str(folder), block_length=8)
    with pytest.raises(ConfigError, match="not defined for a block model"):
        DacaLM(model=str(folder), cfg=1.0)
