"""Where extraction runs: here (:mod:`.local`; :mod:`.zeroshot` for zero-shot cells) or as
Slurm job arrays (:mod:`.slurm`).

Both fill the same extraction cache (:mod:`audiorepro.runner.cache`), so the stages after
extraction read byte-identical dumps whichever executor made them.
"""
