"""A fixture project that keeps tensors where .to() cannot see them (tests/audit/test_fix.py)."""
