"""mx.random.poisson / mx.nd.random.poisson: moments against the Poisson law, per-element
rates, seeding, and a negative rate refused."""
import numpy as np
import pytest

import minigluon as mx
from minigluon import nd


def test_counts_have_the_poisson_mean_and_variance():
    mx.random.seed(7)
    draws = mx.random.poisson(lam=4, shape=(20000,))
    assert draws.dtype == np.float32 and draws.shape == (20000,)
    values = draws.asnumpy()
    assert (values == np.round(values)).all() and values.min() >= 0
    assert abs(values.mean() - 4) < 0.1 and abs(values.var() - 4) < 0.25


def test_default_rate_is_one_and_seed_repeats():
    mx.random.seed(3)
    first = nd.random.poisson(shape=(2, 3), dtype="float64")
    mx.random.seed(3)
    again = nd.random.poisson(shape=(2, 3), dtype="float64")
    assert first.dtype == np.float64
    np.testing.assert_array_equal(first.asnumpy(), again.asnumpy())


def test_ndarray_rates_give_shape_samples_per_rate():
    out = nd.random.poisson(lam=nd.array([0.0, 1000.0]), shape=500)
    assert out.shape == (2, 500)
    assert out[0].asnumpy().max() == 0
    assert abs(out[1].asnumpy().mean() - 1000) < 10


def test_negative_rate_is_refused_with_its_value():
    with pytest.raises(ValueError, match="non-negative rate, got -2.0"):
        mx.random.poisson(lam=-2, shape=(3,))
    with pytest.raises(ValueError, match="got -1.0"):
        nd.random.poisson(lam=nd.array([1.0, -1.0]))
