"""Storage backends. All SQL lives under this package and nowhere else."""
