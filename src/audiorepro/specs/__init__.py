"""The files a user writes to say what to check: studies, published values, settings."""
