"""Command-line entry points that belong to no room below, argument parsing only: `daca-bench train`
(`train`), `daca-bench sft` (`sft`), `daca-bench eval` (`eval`; the runner and protocols are in daca_bench.eval), `daca-bench lm-eval`
(`lmeval`: lm-evaluation-harness with model `daca`, daca_bench.eval.lmeval), `daca-bench sample` (`sample`: the sampler,
daca_bench.rl.sampler, on a task's prompts), `daca-bench table` (`table`), `daca-bench tasks` (`tasks`:
the listing, the task battery on one task, its prompts) and `daca-bench new-task` (`scaffold`). The other commands live in the
module of their concept (`ablate` in grid.ablation, `plot` in figures.plots, `reproduce` in
grid.reproduce, ...); `daca_bench.cli` maps names to modules.

May import every room of experiments and everything below it; nothing imports this room but
`daca_bench.cli`.
"""
