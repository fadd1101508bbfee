"""The paper presets on d1's protocol (docs/paper-presets.md), element by element, on CPU: the
greedy sampler against LLaDA's generate token for token, EOS with pad = eos, d1's prompt layout,
d1's data files in their published formats (written here), d1's readings and metrics beside ours,
d1's training rewards, LoRA targets, the 4-bit gate, the prompt cut, and each d1 preset's
evaluation path end to end on the native LLaDA class at a tiny config (daca_bench.testing.paper:
LLaDA's config fields, special-token ids and chat layout)."""

import csv
import json
import math
import random
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from daca_bench.config import ConfigError, RLConfig, SamplerConfig, apply, load_config
from daca_bench.registry import get_task, load_all, task_spec

from repo_paths import FIXTURES as FIX
from repo_paths import ROOT

load_all()
S = sys.modules["daca_bench_tasks.sudoku"]
C = sys.modules["daca_bench_tasks.countdown"]

# preset -> (train.task, train.protocol): gsm8k and math500 declare d1's protocol; countdown_d1 / sudoku_d1 are d1's own data
D1_PRESETS = {
    "gsm8k": ("gsm8k", "d1"),
    "math500": ("math500", "d1"),
    "countdown": ("countdown_d1", ""),
    "sudoku": ("sudoku_d1", ""),
}


# ---- d1's files, written here in d1's published formats (d1's own files are not shipped) ----
def _sudoku_rows(count: int, seed: int = 0) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    grids = list(S._all_4x4())
    rows, seen = [], set()
    while len(rows) < count:
        solution = rng.choice(grids)
        puzzle = S.make_puzzle(solution, rng.randint(6, 10), rng)
        if puzzle not in seen:
            seen.add(puzzle)
            rows.append((puzzle, solution))
    return rows


def write_d1_sudoku_csv(path: Path, rows) -> Path:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["Puzzle", "Solution"])
        w.writerows(rows)
    return path


def write_d1_countdown_jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps({"input": ",".join(map(str, n)), "output": str(t)}) + "\n" for n, t in rows))
    return path


@pytest.fixture(scope="module")
def d1_data(tmp_path_factory):
    folder = tmp_path_factory.mktemp("d1") / "dataset"
    folder.mkdir()
    rows = _sudoku_rows(320)
    write_d1_sudoku_csv(folder / "4x4_test_sudoku.csv", rows[:300])
    write_d1_sudoku_csv(folder / "4x4_sudoku_unique_puzzles.csv", rows[300:])
    rng = random.Random(1)
    write_d1_countdown_jsonl(
        folder / "countdown_cd3_test.jsonl",
        [([rng.randint(1, 99) for _ in range(3)], rng.randint(10, 100)) for _ in range(40)],
    )
    return folder


@pytest.fixture
def d1_env(d1_data, monkeypatch):
    monkeypatch.setenv("DACA_BENCH_D1_DATA", str(d1_data))
    return d1_data


@pytest.fixture(scope="module")
def llada_dir(tmp_path_factory):
    from daca_bench.testing import write_paper_folder

    return write_paper_folder("llada", tmp_path_factory.mktemp("llada") / "model")


@pytest.fixture(scope="module")
def llada(llada_dir):
    from daca_bench.models import load_pretrained

    torch.set_num_threads(2)
    return load_pretrained(str(llada_dir))


# ---- 1. EOS -----------------------------------------------------------------------------------
def test_llada_tokenizer_has_pad_equal_to_eos(llada):
    assert llada.pad_token_id == llada.eos_token_id == llada.tokenizer.eos_token_id
    assert llada.tokenizer.chat_template


@torch.no_grad()
def _llada_generate(model, prompt, mask_id: int, gen_length: int, block_length: int, steps: int):
    """LLaDA's own sampler, written here from its published algorithm (generate.py, which d1's eval
    runs): greedy, low-confidence remasking, blocks left to right, each block's tokens split evenly
    over its steps (the remainder to the first steps), the model called without a mask. One change:
    the mask id cannot be chosen (ours bans it; LLaDA's could pick it and leave the position masked).
    Returns the completion (N, L) and the step that committed each position (N, L), counted from 1."""
    n, start = prompt.shape
    x = torch.cat([prompt, torch.full((n, gen_length), mask_id)], 1)
    when = torch.zeros(n, gen_length, dtype=torch.long)
    per_block, t = steps // (gen_length // block_length), 0
    for blk in range(gen_length // block_length):
        hi = start + (blk + 1) * block_length
        count = (x[:, hi - block_length : hi] == mask_id).sum(1)
        for i in range(per_block):
            t += 1
            logits = model(input_ids=x).logits.double()  # (N, P+L, V)
            logits[..., mask_id] = -math.inf
            x0 = logits.argmax(-1)
            confidence = torch.softmax(logits, -1).gather(-1, x0[..., None]).squeeze(-1)  # (N, P+L)
            confidence[:, hi:] = -math.inf
            confidence[x != mask_id] = -math.inf
            for row in range(n):
                k = int(count[row] // per_block + (i < count[row] % per_block))
                pick = confidence[row].topk(k).indices
                x[row, pick] = x0[row, pick]
                when[row, pick - start] = t
    return x[:, start:], when


@pytest.mark.parametrize("gen_length,block_length,steps", [(16, 8, 8), (16, 16, 6), (12, 4, 12)])
def test_the_greedy_sampler_equals_llada_s_generate_token_for_token(llada, gen_length, block_length, steps):
    from daca_bench.rl.sampler import pad_prompts, sample

    prompts = ["12+5=", "3*4-1"]  # the same length: no padding, where d1's and our masking differ
    ids, mask = pad_prompts(llada, prompts)
    assert bool(mask.all())
    want, when = _llada_generate(llada.model, ids, llada.mask_token_id, gen_length, block_length, steps)
    batch = sample(llada, prompts, SamplerConfig(gen_length=gen_length, block_length=block_length, steps=steps), seed=0)
    assert torch.equal(batch.completion_ids, want)
    assert torch.equal(batch.trajectory.commit_step, when)  # the same positions, in the same order
    assert len(set(want.flatten().tolist())) > 1 and int(when.max()) == steps


def test_eos_can_be_sampled_when_pad_is_eos_and_ends_the_loss_mask(llada):
    import copy

    from daca_bench.rl.sampler import sample

    model = copy.deepcopy(llada.model)
    head = model.get_output_embeddings()  # LLaDA's untied output layer, model.transformer.ff_out
    biased = torch.nn.Linear(head.in_features, head.out_features, bias=True)
    with torch.no_grad():
        biased.weight.copy_(head.weight)
        biased.bias.zero_()
        biased.bias[llada.eos_token_id] = 4.0  # EOS is likely, not certain: some positions commit text first
    model.set_output_embeddings(biased)
    adapter = type(llada)(model, llada.tokenizer, llada.mask_token_id, llada.eos_token_id, llada.pad_token_id)
    batch = sample(adapter, ["12+5=", "3-1+20=", "7="], SamplerConfig(gen_length=16, block_length=8, steps=16), seed=0)
    eos = batch.completion_ids == llada.eos_token_id
    assert eos.any(dim=1).all(), "EOS was never committed: it is banned"
    first = eos.int().argmax(dim=1)
    assert torch.equal(batch.completion_mask.sum(1), first + 1)  # the loss mask stops at the first EOS
    assert (batch.completion_mask.sum(1) < 16).any()


def test_the_tiny_model_still_never_commits_its_pad(tiny):
    from daca_bench.rl.sampler import sample

    assert tiny.pad_token_id != tiny.eos_token_id
    model = tiny.model
    batch = sample(tiny, ["12+5="], SamplerConfig(gen_length=8, block_length=8, steps=8, temperature=5.0), seed=3)
    assert not (batch.completion_ids == tiny.pad_token_id).any()
    assert not (batch.completion_ids == tiny.mask_token_id).any()
    assert model is tiny.model


# ---- 2. prompts ----------------------------------------------------------------------------------
def _llada_chat(user: str) -> str:
    """LLaDA's published chat layout, built by hand: header, trimmed content, eot, open assistant header."""
    return (
        f"<|start_header_id|>user<|end_header_id|>\n\n{user.strip()}<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n"
    )


def _d1_tasks(split: str):
    gsm = get_task("gsm8k", split=split, protocol="d1", path=FIX / "gsm8k.jsonl")
    math = get_task("math500", split=split, protocol="d1", path=FIX / "math500.jsonl")
    cd = get_task("countdown_d1", split=split, records=[{"numbers": [3, 5, 7], "target": 22}])
    sd = get_task("sudoku_d1", split=split, records=[{"puzzle": "3102200002100320", "solution": "3142243142131324"}])
    return gsm, math, cd, sd


def test_d1_test_prompts_are_system_prompt_question_template_and_reasoning_prefill(llada):
    from daca_bench.eval.prompts import task_prompts

    gsm, math, cd, sd = _d1_tasks("test")
    question = json.loads((FIX / "gsm8k.jsonl").read_text().splitlines()[0])["question"]
    system = gsm.samples[0].prompt.split("\n\n" + question)[0]
    assert gsm.samples[0].prompt == system + "\n\n" + question  # d1: system prompt, blank line, question
    assert "\\boxed{}" in system and "<reasoning>" in system and "<answer>" in system
    for task in (gsm, math, cd, sd):
        s = task.samples[0]
        assert task_prompts(llada, [s], chat=True) == [_llada_chat(s.prompt) + "<reasoning>"]
        assert task_prompts(llada, [s], chat=False) == [s.prompt + "<reasoning>"]
    assert cd.samples[0].prompt.endswith("\n\nNumbers: [3, 5, 7]\nTarget: 22") and "\\boxed{" in cd.samples[0].prompt
    assert sd.samples[0].prompt.endswith("\n\nSolve the following Sudoku puzzle: 3102200002100320\n")
    assert "\\boxed{}" in math.samples[0].prompt


def test_d1_train_prompts_have_d1s_training_layout_and_no_prefill(llada):
    from daca_bench.eval.prompts import task_prompts

    gsm, math, cd, sd = _d1_tasks("train")
    for task in (gsm, math, cd, sd):
        s = task.samples[0]
        assert "prefill" not in s.metadata and s.prompt.startswith("\n")  # d1's training system prompt
        assert task_prompts(llada, [s], chat=True) == [_llada_chat(s.prompt)]
    assert "\\boxed" not in gsm.samples[0].prompt and "\\boxed{}" in math.samples[0].prompt
    assert "<answer>\n2*4-3\n</answer>" in cd.samples[0].prompt and "[3, 5, 7]" in cd.samples[0].prompt


def test_a_users_copy_of_d1s_wording_replaces_ours(tmp_path, monkeypatch):
    table = tmp_path / "prompts.json"
    table.write_text(json.dumps({"sudoku_d1": {"test": "THEIR WORDS"}}))
    monkeypatch.setenv("DACA_BENCH_D1_PROMPTS", str(table))
    rec = [{"puzzle": "3102200002100320", "solution": "3142243142131324"}]
    assert get_task("sudoku_d1", records=rec).samples[0].prompt.startswith("THEIR WORDS\n\nSolve the following")
    assert not get_task("sudoku_d1", split="train", records=rec).samples[0].prompt.startswith("THEIR WORDS")


def test_training_prompts_keep_their_last_tokens(llada):
    from daca_bench.eval.prompts import task_prompts, truncate_prompt

    s = get_task(
        "sudoku_d1", split="train", records=[{"puzzle": "3102200002100320", "solution": "3142243142131324"}]
    ).samples[0]
    full = task_prompts(llada, [s], chat=True)[0]
    ids = llada.encode([full])[0]
    cut = task_prompts(llada, [s], chat=True, max_tokens=200)[0]
    assert len(ids) > 200 and llada.encode([cut])[0] == ids[-200:]
    assert truncate_prompt(llada, "short", 200) == "short"


# ---- 3/4. d1's test sets, readings and metrics ------------------------------------------------
def test_d1_sudoku_csv_loads_4x4_draws_like_d1_and_reports_cells_and_grids(d1_env):
    test = get_task("sudoku_d1", split="test")
    rows = list(csv.DictReader(open(d1_env / "4x4_test_sudoku.csv")))
    order = np.random.RandomState(42).choice(len(rows), 256, replace=False)
    assert len(test.samples) == 256 and [s.metadata["puzzle"] for s in test.samples] == [
        rows[i]["Puzzle"] for i in order
    ]
    assert all(s.metadata["size"] == 4 and len(s.metadata["puzzle"]) == 16 for s in test.samples)
    assert [s.metadata["puzzle"] for s in get_task("sudoku_d1", split="test", n=5).samples] == [
        s.metadata["puzzle"] for s in test.samples[:5]
    ]
    s = test.samples[0]
    solution, puzzle = s.metadata["solution"], s.metadata["puzzle"]
    blanks = puzzle.count("0")
    r = test.verify(s, f"<answer>\n{solution}\n</answer>")
    assert r.status == "correct" and r.details["d1"] == [blanks, blanks]
    first_blank = puzzle.index("0")
    wrong = solution[:first_blank] + str(int(solution[first_blank]) % 4 + 1) + solution[first_blank + 1 :]
    r = test.verify(s, f"<answer>\n{wrong}\n</answer>")
    assert r.status == "wrong" and r.details["d1"] == [blanks - 1, blanks]  # whole grid wrong, cells mostly right
    from daca_bench.eval.evaluate import score

    out = score(test, [s, s], [f"<answer>{solution}</answer>", f"<answer>{wrong}</answer>"])
    assert out["accuracy"] == 0.5 and out["accuracy_d1"] == pytest.approx((2 * blanks - 1) / (2 * blanks))


def test_d1_sudoku_train_split_is_d1s_shuffle_without_the_last_500(tmp_path):
    import datasets

    rows = _sudoku_rows(520, seed=5)
    path = write_d1_sudoku_csv(tmp_path / "train.csv", rows)
    train = get_task("sudoku_d1", split="train", path=path)
    order = datasets.Dataset.from_list([{"puzzle": p} for p, _ in rows]).shuffle(seed=42)["puzzle"]
    assert [s.metadata["puzzle"] for s in train.samples] == order[:20]


def test_d1_countdown_file_loads_as_three_number_instances(d1_env):
    test = get_task("countdown_d1", split="test")
    lines = [json.loads(x) for x in (d1_env / "countdown_cd3_test.jsonl").read_text().splitlines()]
    order = np.random.RandomState(42).choice(len(lines), len(lines), replace=False)
    assert len(test.samples) == 40
    assert [s.metadata["numbers"] for s in test.samples] == [
        [int(x) for x in lines[i]["input"].split(",")] for i in order
    ]
    assert all(len(s.metadata["numbers"]) == 3 and isinstance(s.metadata["target"], int) for s in test.samples)


@pytest.mark.parametrize(
    "completion,ours,d1",
    [
        ("<answer>\n\\boxed{3 \\times 5 + 7}\n</answer>", "correct", 1),
        ("\\boxed{3*5+7} = 22", "correct", 1),
        ("\\boxed{3*5+7 = 22}", "correct", 1),  # d1 cuts `= number`
        ("<answer>3*5+7</answer>", "correct", 0),  # d1 reads a box only (without one: the whole text)
        ("\\boxed{3*5+7", "correct", 0),  # an unclosed box: d1 falls back to the tags, then the whole text
        ("\\boxed{5*3+7+0}", "wrong", 0),
        ("\\boxed{(7+15)}", "wrong", 0),
        ("\\boxed{__import__('os')}", "no_answer", 0),
    ],
)
def test_countdown_d1_reads_like_d1_beside_our_exact_verdict(completion, ours, d1):
    task = get_task("countdown_d1", records=[{"numbers": [3, 5, 7], "target": 22}])
    r = task.verify(task.samples[0], completion)
    assert r.status == ours and r.details["d1"] == [d1, 1]


def test_d1_arithmetic_is_pythons_without_eval():
    assert C.d1_value("2**3") == 8 and C.d1_value("7//2") == 3 and C.d1_value("-3+5") == 2
    assert C.d1_value("1/0") is None and C.d1_value("(1)(2)") is None and C.d1_value("9**9**9") is None
    assert C.d1_value("__import__('os')") is None and C.d1_value("3 x 4") is None


@pytest.mark.parametrize(
    "completion,ours,d1",
    [
        ("<answer>\n\\boxed{27}\n</answer>", "correct", 1),
        ("\\boxed{...} then \\boxed{27}", "correct", 1),  # d1 skips `...` boxes, takes the first number box
        ("\\boxed{26} no, \\boxed{27}", "correct", 0),  # d1: the first box; ours: the last
        ("<answer>I get 27</answer>", "correct", 1),  # d1: the last number inside the first answer pair
        ("so 27", "correct", 0),  # ours falls back to the last number; d1 does not
    ],
)
def test_gsm8k_d1_reading_beside_ours(completion, ours, d1):
    task = get_task("gsm8k", protocol="d1", path=FIX / "gsm8k.jsonl")
    r = task.verify(task.samples[0], completion)  # gold 27
    assert r.status == ours and r.details["d1"] == [d1, 1]


@pytest.mark.parametrize(
    "completion,ours,d1",
    [
        ("<answer>\\boxed{\\dfrac{5}{6}}</answer>", "correct", 1),
        ("\\boxed{\\frac56}", "correct", 1),
        ("\\boxed{5/6}", "correct", 1),
        ("\\boxed{10/12}", "correct", 0),  # the same value: math-verify says yes, d1's string match no
        ("<answer>\\frac{5}{6}</answer>", "correct", 0),  # no box: d1 compares the whole completion
        # d1 eval/parse_and_get_acc.py:122-130: the first <answer> pair only where the box reading is empty or fails
        ("\\boxed{} so <answer>\\frac{5}{6}</answer>", "correct", 1),  # an empty box
        ("<answer>\\frac56</answer> or \\boxed{5/6", "correct", 1),  # the last box never closes
        ("<answer>1</answer><answer>\\frac56</answer> \\boxed{", "correct", 0),  # d1: the FIRST pair; ours: the last
        ("so \\boxed 5/6$ it is", "correct", 1),  # `\\boxed ` (space): up to the next $
    ],
)
def test_math500_d1_reading_beside_ours(completion, ours, d1):
    task = get_task("math500", protocol="d1", path=FIX / "math500.jsonl")
    r = task.verify(task.samples[0], completion)  # gold \frac{5}{6}
    assert r.status == ours and r.details["d1"] == [d1, 1]


def test_d1_normalisation_falls_back_to_the_raw_strings_where_d1s_does():
    from daca_bench.rewards.mathcheck import d1_equivalent, d1_normalise

    assert d1_normalise("\\left( 3, \\frac{\\pi}{2} \\right)") == "(3,\\frac{\\pi}{2})"
    assert d1_normalise("x = 0.5") == "\\frac{1}{2}" and d1_normalise("10^{\\circ}") == "10"
    assert d1_equivalent("x/2", "x/2") and not d1_equivalent("x/2", "x / 2")  # d1's a/b step fails: raw strings
    assert not d1_equivalent(None, "1") and d1_equivalent("\\sqrt2", "\\sqrt{2}")


# ---- 5. d1's training rewards, data and model options -----------------------------------------------
def test_d1_gsm8k_training_reward_has_d1s_five_terms():
    task = get_task("gsm8k", split="train", protocol="d1", path=FIX / "gsm8k.jsonl", shaping="d1")
    s = task.samples[0]  # gold 27
    perfect = "<reasoning>\n36-9\n</reasoning>\n<answer>\n27\n</answer>\n"
    r = task.verify(s, perfect + "<|eot_id|>")  # d1's rewards see the text without special tokens
    assert r.details["soft_format"] == 0  # d1's soft pattern cannot cross a newline: only one-line answers earn it
    assert r.value == pytest.approx(0.5 + 0.5 + 2.0 + 0.5)  # xml count, strict, integer, correct
    one_line = task.verify(s, "<reasoning>36-9</reasoning> <answer>27</answer>")
    assert one_line.details["soft_format"] == 0.5 and one_line.details["strict_format"] == 0
    multi = "<reasoning>\na\nb\n</reasoning>\n<answer>\n27\n</answer>\n"  # d1's `.` stops at a newline
    r = task.verify(s, multi)
    assert r.details["strict_format"] == 0 and r.details["soft_format"] == 0 and r.value == pytest.approx(3.0)
    assert task.verify(s, "<answer>27.0</answer>").details["correct_d1"] == 0  # an exact string match


def test_d1_math_training_reward_is_two_for_the_box_plus_d1s_format_term():
    task = get_task("math500", split="train", protocol="d1", path=FIX / "math500.jsonl", shaping="d1")
    s = task.samples[0]
    assert s.metadata["d1_gold"] == "\\frac{5}{6}"  # the last box of the worked solution
    assert task.verify(s, "<answer>\\boxed{\\dfrac{5}{6}}</answer>").value == pytest.approx(2.75)
    assert task.verify(s, "\\boxed{\\frac{5}{6}}").value == pytest.approx(2.25)
    assert task.verify(s, "<answer>7</answer>").value == pytest.approx(0.75)


def test_d1_countdown_and_sudoku_training_rewards():
    cd = get_task("countdown_d1", split="train", records=[{"nums": [3, 5, 7], "target": 22}], shaping="d1")
    values = [
        cd.verify(cd.samples[0], c).value
        for c in ("<answer>\n3*5+7\n</answer>", "<answer>3+5+7</answer>", "<answer>1+1</answer>", "3*5+7")
    ]
    assert values == [1.0, pytest.approx(0.1), pytest.approx(0.1), 0.0]
    sd = get_task(
        "sudoku_d1",
        split="train",
        records=[{"puzzle": "3102200002100320", "solution": "3142243142131324"}],
        shaping="d1",
    )
    assert sd.verify(sd.samples[0], "<answer>3142 2431 4213 1111</answer>").value == pytest.approx(7 / 8)
    assert sd.verify(sd.samples[0], "3142243142131324").value == 0.0  # d1 reads the tags only


def test_llada_math500_preset_resolves_a_training_split():
    from daca_bench.train.trainer import training_task

    cfg = load_config(ROOT / "configs/paper/llada_math500.yaml", [], RLConfig)
    assert "train" in task_spec(cfg.train.task).splits and "train" in task_spec("math500").splits
    task = get_task(
        cfg.train.task, split="train", protocol=cfg.train.protocol, path=FIX / "math500.jsonl", shaping="d1"
    )
    assert task.split == "train" and len(task.samples) > 0
    with pytest.raises(Exception) as err:  # offline here: the hub load fails, not the split lookup
        training_task(cfg)
    assert "no split" not in str(err.value)


def test_paper_presets_carry_d1s_protocol():
    for stem, (task, protocol) in D1_PRESETS.items():
        cfg = load_config(ROOT / f"configs/paper/llada_{stem}.yaml", [], RLConfig)
        t = cfg.train
        assert (t.task, t.protocol, t.reward, t.max_prompt_length) == (task, protocol, "d1", 200)
        assert t.lora_target_modules.split(",") == [
            "q_proj",
            "k_proj",
            "v_proj",
            "o_proj",
            "up_proj",
            "down_proj",
            "gate_proj",
        ]
        assert not t.load_in_4bit and t.chat_template
    assert RLConfig().train.lora_target_modules == "all-linear" and RLConfig().train.max_prompt_length == 0


def test_lora_targets_are_the_named_modules(llada_dir):
    from daca_bench.engine.policy import load_policy, lora_targets

    cfg = apply(
        RLConfig(),
        {
            "model": {"name": str(llada_dir)},
            "train": {
                "lora": True,
                "lora_r": 2,
                "lora_alpha": 4,
                "lora_target_modules": "q_proj, k_proj,v_proj,up_proj",
            },
        },
    )
    wrapped = {
        n.split(".lora_A")[0].rsplit(".", 1)[-1]
        for n, _ in load_policy(cfg, None).model.named_parameters()
        if "lora_A" in n
    }
    assert wrapped == {"q_proj", "k_proj", "v_proj", "up_proj"}
    assert lora_targets("all-linear") == "all-linear"
    with pytest.raises(ConfigError):
        lora_targets(" , ")


def test_4bit_base_is_gated_with_one_line(llada_dir, tmp_path, capsys):
    from daca_bench.cli import main

    if torch.cuda.is_available():
        pytest.skip("the gate under test is the one a machine without CUDA hits")
    rc = main(
        [
            "train",
            "--output-dir",
            str(tmp_path / "run"),
            "--no-progress",
            f"model.name={llada_dir}",
            "train.task=even_length",
            "train.lora=true",
            "train.load_in_4bit=true",
            "train.steps=1",
        ]
    )
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "\n" not in err and "load_in_4bit" in err and "CUDA" in err
    from daca_bench.engine.policy import nf4_config

    with pytest.raises(ConfigError, match="train.lora=true"):
        nf4_config(apply(RLConfig(), {"train.load_in_4bit": True, "model.name": str(llada_dir)}))


# ---- 6. each d1 preset's evaluation path, end to end on the native LLaDA class ------------------
def _preset_test_task(stem: str, task: str, protocol: str, n: int):
    if stem in ("gsm8k", "math500"):
        return get_task(task, split="test", protocol=protocol, path=FIX / f"{stem}.jsonl", n=n)
    return get_task(task, split="test", protocol=protocol, n=n)


@pytest.mark.parametrize("stem", sorted(D1_PRESETS))
def test_each_d1_preset_evaluates_end_to_end_with_d1s_metric_beside_ours(stem, llada, d1_env, tmp_path):
    from daca_bench.eval.runner import evaluate_lengths, protocol

    cfg = load_config(ROOT / f"configs/paper/llada_{stem}.yaml", [], RLConfig)
    assert (cfg.eval.block_length, cfg.eval.steps * 2, cfg.eval.temperature) == (32, cfg.eval.gen_length, 0.0)
    task = _preset_test_task(stem, cfg.train.task, cfg.train.protocol, 2)
    samples = list(task.samples)
    table = evaluate_lengths(
        llada, task, samples, {16: protocol(16)}, tmp_path, chat=cfg.train.chat_template, progress=False
    )
    row = table[0]
    assert row["n"] == 2 and 0 <= row["accuracy"] <= 1 and 0 <= row["acc_d1"] <= 1
    lines = [json.loads(x) for x in (tmp_path / "samples.jsonl").read_text().splitlines()]
    assert all(len(r["d1"]) == 2 for r in lines)
    assert "acc_d1" in (tmp_path / "summary.md").read_text()


def test_the_json_preset_evaluates_on_llada_without_a_d1_metric(llada, tmp_path):
    """The paper presets with no d1 run (code tasks need the sandbox; JSON does not) keep their own metric only."""
    from daca_bench.eval.runner import evaluate_lengths, protocol

    cfg = load_config(ROOT / "configs/paper/llada_json_schema.yaml", [], RLConfig)
    task = get_task(cfg.train.task, split="test", n=2)
    table = evaluate_lengths(
        llada, task, list(task.samples), {16: protocol(16)}, tmp_path, chat=cfg.train.chat_template, progress=False
    )
    assert table[0]["n"] == 2 and table[0]["acc_d1"] == ""


def test_eval_command_reports_d1s_metric_beside_ours(llada_dir, d1_env, tmp_path, capsys):
    from daca_bench.cli import main

    assert (
        main(
            [
                "eval",
                "--model",
                str(llada_dir),
                "--task",
                "sudoku_d1",
                "--n",
                "2",
                "--gen-length",
                "16",
                "--output-dir",
                str(tmp_path),
                "--no-progress",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "| gen_length | n | accuracy | acc_d1 |" in out and "chat template on" in out
    header, _, row = out.split("| gen_length")[1].splitlines()[:3]
    assert row.split("|")[4].strip() != ""  # acc_d1 is filled for a d1 task


def test_a_missing_d1_file_is_one_line_naming_the_variable(monkeypatch, capsys):
    from daca_bench.cli import main

    monkeypatch.delenv("DACA_BENCH_D1_DATA", raising=False)
    with pytest.raises(ConfigError, match="DACA_BENCH_D1_DATA"):
        get_task("sudoku_d1", split="test")
    assert main(["eval", "--task", "countdown_d1", "--n", "1", "--no-progress", "--output-dir", "/tmp/x-d1"]) == 2
    assert "DACA_BENCH_D1_DATA" in capsys.readouterr().err
