"""A study -> its output folder: the driver, the extraction cache, the demo, ``evaluate``'s
study files, HEAR runs and their cross-run table, and three parts:
``kinds/`` (one module or package per study kind and their registry), ``executors/`` (local
and Slurm extraction) and ``output/`` (the three outputs, manifest, publication, signing)."""
