"""lm-evaluation-harness tasks over data this project generates, so `daca-bench lm-eval` runs offline:
`daca_gsm8k_local` (GSM8K's layout: a question, an answer ending `#### N`, read like lm_eval's gsm8k:
the number after `####`, else the last number) and `daca_mc_local` (multiple choice, the right sum
among three), both from the `arithmetic` task's generator. Our own YAMLs, over lm_eval's `dataset_path:
json` with local `data_files`.

    write_local_tasks(Path("runs/lmeval-tasks"), n=20)   # then --include_path runs/lmeval-tasks
    daca-bench lm-eval --tasks daca_gsm8k_local,daca_mc_local --model_args model=tiny,gen_length=8 --limit 4
"""

from __future__ import annotations

import json
import random
from pathlib import Path

TASKS = ("daca_gsm8k_local", "daca_mc_local")

GSM8K_YAML = """task: daca_gsm8k_local
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
fewshot_split: test
output_type: generate_until
doc_to_text: "Question: {{{{question}}}}\\nAnswer:"
doc_to_target: "{{{{answer.split('####')[-1].strip()}}}}"
generation_kwargs:
  until: ["Question:", "\\n\\n"]
  do_sample: false
  temperature: 0.0
filter_list:
  - name: strict-match
    filter:
      - function: regex
        regex_pattern: "#### (\\\\-?[0-9\\\\.\\\\,]+)"
      - function: take_first
  - name: flexible-extract
    filter:
      - function: regex
        group_select: -1
        regex_pattern: "(-?[$0-9.,]{{2,}})|(-?[0-9]+)"
      - function: take_first
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
    ignore_case: true
    ignore_punctuation: false
    regexes_to_ignore: [",", "\\\\$", "(?s).*#### ", "\\\\.$"]
metadata:
  version: 1.0
"""

MC_YAML = """task: daca_mc_local
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{question}}}}"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: "{{{{label}}}}"
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
metadata:
  version: 1.0
"""


def records(n: int, seed: int = 0) -> tuple[list[dict], list[dict]]:
    """n GSM8K-layout rows and n multiple-choice rows from the arithmetic task's test split."""
    from ..registry import get_task

    rng = random.Random(seed)
    gsm, mc = [], []
    for s in get_task("arithmetic", split="test", n=n, seed=seed).samples:
        expr, answer = s.metadata["expression"], int(s.metadata["answer"])
        gsm.append({"question": f"What is {expr}?", "answer": f"{expr} = {answer}\n#### {answer}"})
        choices = [answer, answer + rng.choice([-2, -1, 1, 2]), answer + rng.choice([10, -10])]
        rng.shuffle(choices)
        mc.append({"question": f"{expr}=", "choices": [str(c) for c in choices], "label": choices.index(answer)})
    return gsm, mc


def write_local_tasks(folder: Path, n: int = 20, seed: int = 0) -> Path:
    """The two tasks' YAMLs and JSONL data in FOLDER (absolute data paths); returns FOLDER."""
    folder = Path(folder).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    gsm, mc = records(n, seed)
    for name, rows, yaml in (("daca_gsm8k_local", gsm, GSM8K_YAML), ("daca_mc_local", mc, MC_YAML)):
        data = folder / f"{name}.jsonl"
        data.write_text("".join(json.dumps(r) + "\n" for r in rows))
        (folder / f"{name}.yaml").write_text(yaml.format(data=json.dumps(str(data))))
    return folder
