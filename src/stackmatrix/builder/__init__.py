"""Backends that make a cell's environment exist: venv (uv), current, docker."""
