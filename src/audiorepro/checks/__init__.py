"""Checks over dumps and the installation: parity, published values, explain, selfcheck, locks."""
