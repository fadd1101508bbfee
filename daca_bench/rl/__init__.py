"""The RL algorithm for masked diffusion LMs: the sampler and its trajectory record (`sampler`), its
cache variants (`cache`), likelihood estimators with SML and the Monte Carlo ELBO (`likelihood`) on the
strata and keyed masks of `strata`, DPS credit weights (`credit`), advantages and the grpo / gspo /
reinforce_pp losses (`losses`, `lossparts`), the field's bases with their own estimators (`bases/`), and
the compute ledger (`ledger`); greedy evaluation is in daca_bench.eval, `daca-bench sample` in
daca_bench.experiments.commands.sample. Every formula is written out in docs/method.md. The run loop that
drives them is daca_bench.train.

May import: the shared base, `daca_bench.rewards` and `daca_bench.engine`. Never `train` or `experiments`.
"""
