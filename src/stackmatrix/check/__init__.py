"""Compatibility checks: ELF, fatbin, shared libraries, symbols, GPU-arch coverage,
driver, inventory and the runtime probe. The `check` phase lives in `phase`.

The records of the modules `inspect` imports (and findings.py's `Finding`) are typed
named tuples, not frozen dataclasses as elsewhere: importing dataclasses and the methods
it compiles for each class cost ~10 ms of a ~55 ms `stackmatrix inspect` (README,
Speed). tests/unit/check/test_inspect_startup.py holds that list of imports."""
