"""The files a user writes to say what to check, and their one validator: studies (every kind's
spec, HEAR's beside them), published values (retrieval and probe), preprocessing settings, the
checkpoint registry, cell selection, a probe study's runs, derived numbers and gates; and the
records of an output folder that ``verify OUT`` reads back."""
