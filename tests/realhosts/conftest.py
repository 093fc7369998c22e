"""The real-hosts suite runs each role of a job in a network namespace of its own (see
netlab.py), so it needs root and iproute2: without them every test here is skipped,
saying which is missing. Jobs run with the harness of tests/kvstore (clusterkit), which
imports as a sibling, as in that folder."""
import itertools
import os
import sys

import pytest

sys.path.insert(0, os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "kvstore")))

import netlab  # noqa: E402  (after the path above, as the other harnesses)
from test_dist_cluster import assert_gone  # noqa: E402

TAG = f"{netlab.PREFIX}{os.getpid()}"     # every namespace of this run starts with it
_numbers = itertools.count()
_why_not = []                              # computed once per run: [reason or None]


@pytest.fixture(autouse=True)
def _needs_namespaces():
    if not _why_not:
        _why_not.append(netlab.why_not_here(TAG))
    if _why_not[0]:
        pytest.skip(_why_not[0])


@pytest.fixture
def lab():
    """A fresh switch and no hosts yet; every namespace it made is gone afterwards, even
    when the test failed."""
    netlab.sweep_stale()
    made = netlab.Lab(f"{TAG}-{next(_numbers)}")
    try:
        yield made
    finally:
        made.close()
    assert_gone([p.pid for p in made.delayers])
    left = [n for n in netlab.ip("netns", "list").split() if n.startswith(made.tag + "-")]
    assert not left, f"namespaces left behind: {left}"
