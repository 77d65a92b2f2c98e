"""A study -> its output folder: the driver, the extraction cache, the demo, and three parts:
``kinds/`` (one module or package per study kind and their registry), ``executors/`` (local
and Slurm extraction) and ``output/`` (the three outputs, manifest, publication, signing)."""
