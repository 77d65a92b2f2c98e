"""A study -> its output folder: cache, executors, retrieval and probe stages, outputs."""
