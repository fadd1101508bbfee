"""The figures of a results folder, drawn from what `analysis` reads: the gains with their intervals
and MDE bands, the training and compute curves, the DPS examples (`plots`: `daca-bench plot`, the
notebook's `figures`), the curves themselves (`curves`), the shared colours, facets and legends
(`layout`), one-answer tasks' wrong tokens (`gold`) and checkpoints across decodings and templates with their
intervals (`decodes`: `daca-bench plot` on `eval --decode --templates` folders).

May import: the shared base, `daca_bench.registry`, `daca_bench.eval` (`evaluate`, `compare`) and `analysis`. Never
`grid`, `studies` or `commands`: a figure is drawn from the files of a folder alone, like a table.
"""
