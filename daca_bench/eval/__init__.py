"""Evaluation: a model scored on a task's held-out split (`evaluate`: greedy decoding, accuracy and
statuses, an RL config's fixed test set, the per-prompt records), the protocols of the field's papers
(`protocols`: the decoding table; `prompts`: what a model reads, and how a protocol poses a task, each task as it declares the
protocol; `readers`: the sources' answer readings), the runner behind `daca-bench eval` (`runner`, with
what it writes in `records`), decoding and template as reported axes (`axes`: `eval --decode --templates`,
a grid with bootstrap intervals; `compare`: several checkpoints' grids side by side, paired on prompts),
lm-evaluation-harness's model `daca` (`lmeval`) and lm_eval tasks over
generated data that run offline (`localtasks`). Grids and studies
use protocols from here; the commands only parse arguments.

May import: the shared base (`daca_bench.*` modules), `daca_bench.rewards`, `daca_bench.engine` and
`daca_bench.rl`. Never `train` or `experiments`.
"""
