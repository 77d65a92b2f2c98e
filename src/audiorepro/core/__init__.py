"""The ground floor: errors, deterministic atomic output, hashing, outside paths, progress bars,
threads."""
