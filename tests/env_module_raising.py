"""An env module whose import raises (tests/test_bad_input.py's "env module raises on import")."""

raise RuntimeError("this env module fails on import, on purpose")
