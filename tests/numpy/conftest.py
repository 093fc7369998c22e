"""For the mx.np / mx.npx tests: gradcheck on the path, and a guard that resets NumPy mode."""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "ndarray"))  # gradcheck


@pytest.fixture(autouse=True)
def _legacy_mode_after_test():
    """Every test may call npx.set_np(); none may leak NumPy mode into later tests."""
    from minigluon import npx
    yield
    npx.reset_np()
