"""Compatibility checks: ELF, fatbin, shared libraries, symbols, GPU-arch coverage,
driver, inventory and the runtime probe. The `check` phase lives in `phase`."""
