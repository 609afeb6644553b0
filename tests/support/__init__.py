"""Helpers the tests share (not fixtures of one module)."""
