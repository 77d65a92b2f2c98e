"""The ground floor: errors, deterministic atomic output, hashing, progress bars, threads."""
