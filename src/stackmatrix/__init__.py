"""stackmatrix: compatibility x throughput matrices for GPU serving stacks."""

__version__ = "0.1.0"
