"""Inverse trigonometric and hyperbolic ops, radians/degrees and rcbrt: NumPy oracles,
finite-difference first and second derivatives, and bad inputs."""
import math

import numpy as np
import pytest

from minigluon import autograd, nd
from minigluon.base import DTypeError

from gradcheck import check_close, check_grad

# name -> (NumPy oracle, domain sampler giving float64 values inside the domain)
_rng = np.random.default_rng(7)
OPS = {
    "arcsin": (np.arcsin, lambda: _rng.uniform(-0.9, 0.9, (3, 4))),
    "arccos": (np.arccos, lambda: _rng.uniform(-0.9, 0.9, (3, 4))),
    "arctanh": (np.arctanh, lambda: _rng.uniform(-0.9, 0.9, (3, 4))),
    "arcsinh": (np.arcsinh, lambda: _rng.uniform(-3, 3, (3, 4))),
    "arccosh": (np.arccosh, lambda: _rng.uniform(1.2, 4, (3, 4))),
    "radians": (np.radians, lambda: _rng.uniform(-360, 360, (3, 4))),
    "degrees": (np.degrees, lambda: _rng.uniform(-4, 4, (3, 4))),
    "rcbrt": (lambda x: 1 / np.cbrt(x), lambda: _rng.uniform(0.5, 8, (3, 4))),
}


@pytest.mark.parametrize("name", sorted(OPS))
def test_forward_matches_numpy(name):
    oracle, sample = OPS[name]
    x = sample().astype(np.float32)
    out = getattr(nd, name)(nd.array(x))
    assert out.dtype == np.float32
    check_close(out, oracle(x.astype(np.float64)), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", sorted(OPS))
def test_gradient_matches_finite_differences(name):
    check_grad(getattr(nd, name), OPS[name][1]())


@pytest.mark.parametrize("name", sorted(OPS))
def test_second_derivative_matches_finite_differences(name):
    """d/dx of autograd's first derivative (create_graph) vs central differences of it."""
    oracle, sample = OPS[name]
    x0, eps = sample(), 1e-5
    first = lambda v: (oracle(v + eps) - oracle(v - eps)) / (2 * eps)
    want = (first(x0 + 1e-3) - first(x0 - 1e-3)) / 2e-3
    x = nd.array(x0, dtype="float64")
    x.attach_grad()
    with autograd.record():
        g = autograd.grad(getattr(nd, name)(x), [x], create_graph=True)[0]
    g.backward()
    np.testing.assert_allclose(x.grad.asnumpy(), want, rtol=1e-4, atol=1e-6)


def test_radians_and_degrees_are_inverse():
    x = nd.array([0.0, 90.0, -180.0])
    check_close(nd.degrees(nd.radians(x)), [0.0, 90.0, -180.0], atol=1e-4)
    check_close(nd.radians(nd.array([180.0])), [math.pi])


def test_outside_the_domain_gives_nan_as_in_mxnet():
    with np.errstate(invalid="ignore"):
        assert np.isnan(nd.arcsin(nd.array([2.0])).asnumpy()).all()
        assert np.isnan(nd.arccosh(nd.array([0.5])).asnumpy()).all()


def test_bad_input_names_the_op_and_the_fix():
    with pytest.raises(DTypeError, match=r"arcsin: data must be an NDArray, got list .*"
                                         r"mx\.nd\.array"):
        nd.arcsin([0.5])
