"""Checks over dumps, runs and the installation: metric parity, published values (``verify``),
``explain``, ``diff`` of two runs (the numbers' typed view, their tiers and what can move each),
the catalog that ``list`` prints, ``selfcheck`` and the hashed locks."""
