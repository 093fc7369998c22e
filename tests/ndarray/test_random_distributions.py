"""mx.nd.random / mx.random's poisson, gamma, negative_binomial and
generalized_negative_binomial: sample moments against the distributions' formulas,
per-element parameters, seeding, and bad parameters."""
import numpy as np
import pytest

import minigluon as mx
from minigluon import nd
from minigluon.base import ShapeError

N = 200_000
# (sampler, parameters, mean, variance) from the textbook formulas
CASES = [
    ("poisson", {"lam": 3.0}, 3.0, 3.0),
    ("gamma", {"alpha": 2.0, "beta": 1.5}, 2.0 * 1.5, 2.0 * 1.5 ** 2),
    ("negative_binomial", {"k": 3, "p": 0.4}, 3 * 0.6 / 0.4, 3 * 0.6 / 0.4 ** 2),
    ("generalized_negative_binomial", {"mu": 2.0, "alpha": 0.5}, 2.0, 2.0 + 0.5 * 4.0),
    ("generalized_negative_binomial", {"mu": 2.0, "alpha": 0.0}, 2.0, 2.0),
]


@pytest.mark.parametrize("name,params,mean,var", CASES)
def test_sample_moments_match_the_formulas(name, params, mean, var):
    mx.random.seed(7)
    x = getattr(nd.random, name)(shape=(N,), **params)
    assert x.dtype == np.float32 and x.shape == (N,)
    values = x.asnumpy().astype(np.float64)
    assert abs(values.mean() - mean) < 5 * np.sqrt(var / N)
    assert abs(values.var() / var - 1) < 0.05


def test_array_parameters_draw_per_element_and_seed_repeats():
    mx.random.seed(3)
    a = mx.random.poisson(lam=nd.array([1.0, 100.0]), shape=4000)
    assert a.shape == (2, 4000)
    means = a.asnumpy().mean(axis=1)
    assert abs(means[0] - 1) < 0.2 and abs(means[1] - 100) < 2
    mx.random.seed(3)
    np.testing.assert_array_equal(mx.random.poisson(lam=nd.array([1.0, 100.0]),
                                                    shape=4000).asnumpy(), a.asnumpy())
    out = nd.zeros((5,))
    assert nd.random.gamma(alpha=1.0, out=out) is out


@pytest.mark.parametrize("name,params", [("poisson", {"lam": -1.0}),
                                         ("gamma", {"alpha": 0.0}),
                                         ("negative_binomial", {"p": 0}),
                                         ("generalized_negative_binomial", {"mu": -2.0})])
def test_non_positive_parameters_are_refused(name, params):
    with pytest.raises(ShapeError, match=f"{name}: .* must be positive"):
        getattr(nd.random, name)(shape=(3,), **params)
