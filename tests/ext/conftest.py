"""Fixtures shared by the minigluon_ext tests."""
import pytest

import minigluon_ext as ext
from minigluon_ext import fallback


@pytest.fixture(params=["c", "numpy"])
def path(request):
    """Each path in turn, for checks both must do alike."""
    if request.param == "numpy":
        return fallback
    if ext.native is None:
        pytest.fail("the C extension is not built: run `pip install -e .`")
    return ext.native
