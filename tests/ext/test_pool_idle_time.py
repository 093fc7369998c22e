"""The layer kernels' pool: how long an idle worker looks for work (pool_idle_ns,
MINIGLUON_POOL_IDLE_US) changes when workers sleep, never what the kernels compute."""
import numpy as np
import pytest

import minigluon_ext as ext
from minigluon import config

pytestmark = pytest.mark.skipif(ext.native is None, reason="the C extension is not built")


@pytest.fixture
def idle_ns():
    """Set the pool's idle time for one test; the previous one comes back after."""
    kernels = ext.native._kernels
    before = kernels.pool_idle_ns(-1)
    yield kernels.pool_idle_ns
    kernels.pool_idle_ns(before)


def test_pool_idle_time_reads_and_sets(idle_ns):
    before = idle_ns(-1)
    assert before >= 0
    assert idle_ns(2_000_000) == before
    assert idle_ns(-1) == 2_000_000
    assert idle_ns(0) == 2_000_000 and idle_ns(-1) == 0


@pytest.mark.parametrize("idle", [0, 50_000, 2_000_000])
def test_kernels_on_a_long_idle_pool_give_the_one_thread_bits(idle_ns, idle):
    idle_ns(idle)
    rng = np.random.default_rng(0)
    for shape in [(8, 128, 49), (8, 96, 196), (2, 3, 5)]:
        x = rng.standard_normal(shape).astype(np.float32)
        dy = rng.standard_normal(shape).astype(np.float32)
        gamma, beta = rng.random(shape[1], np.float32) + 0.5, rng.standard_normal(shape[1]).astype(np.float32)
        for _ in range(3):      # back to back: the workers still awake
            one = ext.batch_norm_train(x, gamma, beta, 1e-5, "relu", nthreads=1)
            two = ext.batch_norm_train(x, gamma, beta, 1e-5, "relu", nthreads=2)
            for a, b in zip(one, two):
                np.testing.assert_array_equal(a, b)
            g1 = ext.batch_norm_grad(x, dy, one[1], True, "relu", nthreads=1)
            g2 = ext.batch_norm_grad(x, dy, one[1], True, "relu", nthreads=2)
            for a, b in zip(g1, g2):
                np.testing.assert_array_equal(a, b)


def test_pool_idle_us_from_the_environment(monkeypatch):
    monkeypatch.delenv("MINIGLUON_POOL_IDLE_US", raising=False)
    assert config.pool_idle_us() is None
    monkeypatch.setenv("MINIGLUON_POOL_IDLE_US", " 750 ")
    assert config.pool_idle_us() == 750
    for bad in ("-5", "1.5", "long"):
        monkeypatch.setenv("MINIGLUON_POOL_IDLE_US", bad)
        with pytest.raises(config.ConfigError, match="MINIGLUON_POOL_IDLE_US must be"):
            config.pool_idle_us()
