"""Seeded synthetic data: fixture dumps, fixture clips, probe runs, golden values."""
