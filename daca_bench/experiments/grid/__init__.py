"""Running grids: a grid's cells (`ablation`) and how they run (`executors`, `jobs`), the presets
(`presets`, `bases_grid`, `readings`, `headline`) and their pipeline (`pipeline`: SFT -> lr
sweep -> grid -> table), `reproduce`, `calibrate`, pre-registration (`preregister`) and the
code a cell ran (`provenance`).

May import: the shared base, `daca_bench.engine`, `daca_bench.rl`, `daca_bench.train` (a cell is a training
run) `analysis` (a pipeline ends in a table) and `figures` (and in its plots).
Never `studies` or `commands`.
"""
