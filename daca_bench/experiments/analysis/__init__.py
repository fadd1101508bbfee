"""Reading finished cells: a run's records from its cell folders or packed in one Parquet file
(`cellstore`, `daca-bench pack`), the cell table and its paired statistics (`results`, `stats`,
`clusters`) and the table written as Markdown, CSV and LaTeX (`render`), a cell's accuracy as the
share of correct answers (`accuracy`), what each variant ran and the paper's gain beside it
(`variants`), what a confirmatory table registered before its first cell (`design`), sizing a
design and its power (`plan`, `power`), two runs compared (`replicate`, `agreement`) and the
replication report written (`replication`), and the compute budgets a cell was read at
(`budgets`). The figures are in `figures`.

May import: the shared base (`daca_bench.*` modules), `daca_bench.registry` for task specs, and
`daca_bench.eval.evaluate` to read evaluation records. Never `figures`, `grid`, `studies` or
`commands`: a table is rebuilt from the files of a folder alone, whatever ran it.
"""
