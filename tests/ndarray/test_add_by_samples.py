"""The `add` operator on two big host arrays of one shape is split by samples over the
compute threads (sample_parts.add): NumPy's bits in 1 to 3 parts, through nd.add, the `+`
of NDArrays and a hybridized residual block (values and gradients as unsplit); scalars,
broadcasting and small arrays stay NumPy's own sum."""
import numpy as np
import pytest

from minigluon import autograd, nd, threads
from minigluon.gluon.model_zoo.vision import simple
from minigluon.ndarray import sample_parts


@pytest.fixture
def parts(monkeypatch):
    """Every array big enough to split, in `n` parts; BLAS back to the real count after.
    Returns the list of split calls' sample counts."""
    runs, real = [], sample_parts._run

    def spy(part, samples, n):
        runs.append(samples)
        return real(part, samples, n)

    def use(n):
        monkeypatch.setattr(sample_parts, "MIN_BYTES", 0)
        monkeypatch.setattr(sample_parts.threads, "compute_threads", lambda: n)
        monkeypatch.setattr(sample_parts, "_run", spy)
        return runs
    yield use
    monkeypatch.undo()
    threads.look_again()


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_add_of_big_arrays_is_numpys(parts, n, dtype):
    runs = parts(n)
    rng = np.random.default_rng(n)
    a, b = (rng.standard_normal((5, 4, 3, 6)).astype(dtype) for _ in range(2))
    for got in (nd.add(nd.array(a, dtype=dtype), nd.array(b, dtype=dtype)),
                nd.array(a, dtype=dtype) + nd.array(b, dtype=dtype)):
        assert got.dtype == dtype and np.array_equal(got.asnumpy(), a + b)
    assert runs == ([5, 5] if n > 1 else [])


def test_scalars_broadcasts_and_small_arrays_are_numpys_own_sum(parts):
    parts(2)
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert np.array_equal((nd.array(a) + 2).asnumpy(), a + 2)
    assert np.array_equal(nd.add(nd.array(a), nd.array(a[:1])).asnumpy(), a + a[:1])
    x = nd.array([1.0, 2.0])
    assert np.array_equal((x + x).asnumpy(), [2.0, 4.0])


def _residual_grads(x):
    block = simple._Residual(8, use_1x1conv=True, strides=2)
    block.initialize()
    block.hybridize()
    xd = nd.array(x)
    xd.attach_grad()
    with autograd.record():
        y = block(xd)
        loss = (y * y).sum()
    loss.backward()
    grads = [p.grad().asnumpy() for _, p in sorted(block.collect_params().items())
             if p.grad_req != "null"]
    return [y.asnumpy(), xd.grad.asnumpy()] + grads


def test_hybridized_residual_block_split_matches_unsplit(parts):
    import minigluon as mx
    x = np.random.default_rng(4).standard_normal((6, 4, 8, 8)).astype(np.float32)
    mx.random.seed(1)
    want = _residual_grads(x)
    runs = parts(2)
    mx.random.seed(1)
    got = _residual_grads(x)
    assert 6 in runs            # the shortcut's add (and gradient sums) split by samples
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5 * np.abs(w).max())
