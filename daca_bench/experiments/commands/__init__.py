"""Command-line entry points that belong to no room below: `daca-bench train` (`train`), `daca-bench sft` (`sft`),
`daca-bench eval` (`eval`, with the evaluation protocols of `protocols`), `daca-bench lm-eval`
(`lmeval`: lm-evaluation-harness model `daca`), `daca-bench table` (`table`), `daca-bench tasks` (`tasks`:
the listing, the task battery on one task, its prompts) and `daca-bench new-task` (`scaffold`). The other commands live in the
module of their concept (`ablate` in grid.ablation, `plot` in analysis.plots, `reproduce` in
grid.reproduce, ...); `daca_bench.cli` maps names to modules.

May import every room of experiments and everything below it; nothing imports this room but
`daca_bench.cli`.
"""
