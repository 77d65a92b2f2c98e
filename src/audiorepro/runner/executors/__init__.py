"""Where extraction runs: here (:mod:`.local`) or as Slurm job arrays (:mod:`.slurm`), through
the one interface a study kind describes its cells with (:mod:`.extraction`).

Both fill the same extraction cache (:mod:`audiorepro.runner.cache`), so the stages after
extraction read byte-identical dumps whichever executor made them. What a kind extracts, and
how, lives with the kind (``runner/kinds/``): the executors know no kind.
"""
