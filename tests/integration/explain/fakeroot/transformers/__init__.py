"""Stands in for transformers in the explain test: only `transformers.cli.transformers`."""
