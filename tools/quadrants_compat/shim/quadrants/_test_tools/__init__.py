"""Test-only helpers that Quadrants' tests import from `quadrants._test_tools` (written for qd's shim)."""
