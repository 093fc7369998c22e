"""minigluon_ext.sgd_update: the one-pass SGD step, against the optimizer's NumPy lines.

The C kernel, the NumPy fallback and `SGD._step`'s own NumPy form must give the same bits
for every option (momentum or not, weight decay, clipping, NaN and inf gradients) and every
thread count; bad arrays get errors that name them.
"""
import numpy as np
import pytest

import minigluon as mx
from minigluon import nd
from minigluon.base import DTypeError, ShapeError
from minigluon.optimizer import sgd

UINT = {4: np.uint32, 8: np.uint64}


def same_bits(x, y):
    assert x.dtype == y.dtype and x.shape == y.shape
    assert np.array_equal(x.view(UINT[x.itemsize]), y.view(UINT[y.itemsize]))


def numpy_step(opt, weight, grad, state, lr, wd, monkeypatch):
    """SGD._step with the kernel switched off: the NumPy lines themselves."""
    with monkeypatch.context() as m:
        m.setattr(sgd, "_one_pass", lambda *args: False)
        opt._step(np, 0, weight, grad, state, lr, wd)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("momentum", [0.0, 0.9])
@pytest.mark.parametrize("wd", [0.0, 1e-3])
@pytest.mark.parametrize("clip", [None, 0.02])
@pytest.mark.parametrize("nthreads", [1, 3])
def test_same_bits_as_the_optimizer_numpy_lines(path, dtype, momentum, wd, clip, nthreads,
                                                 monkeypatch):
    rng = np.random.default_rng(0)
    n = 3 * 16384 + 17                               # several blocks and a ragged end
    w, g = (rng.standard_normal(n).astype(dtype) for _ in range(2))
    g[[3, 9, 20]] = [np.nan, np.inf, -np.inf]
    mom = rng.standard_normal(n).astype(dtype) if momentum else None
    opt = sgd.SGD(learning_rate=0.1, momentum=momentum, wd=wd, clip_gradient=clip)
    opt.rescale_grad = 1 / 64
    want_w, want_mom = w.copy(), None if mom is None else mom.copy()
    numpy_step(opt, want_w, g, want_mom, 0.1, wd, monkeypatch)
    got_w, got_mom = w.copy(), None if mom is None else mom.copy()
    out = path.sgd_update(got_w, g, got_mom, lr=0.1, wd=wd, momentum=momentum,
                          rescale_grad=1 / 64, clip_gradient=clip, nthreads=nthreads)
    assert out is got_w
    same_bits(got_w, want_w)
    if mom is not None:
        same_bits(got_mom, want_mom)


def test_trainer_steps_are_the_same_with_and_without_the_kernel(monkeypatch):
    def train(one_pass):
        with monkeypatch.context() as m:
            if not one_pass:
                m.setattr(sgd, "_one_pass", lambda *args: False)
            mx.random.seed(3)
            net = mx.gluon.nn.Dense(7, in_units=5)
            net.initialize(mx.init.Xavier())
            trainer = mx.gluon.Trainer(net.collect_params(), "sgd", {
                "learning_rate": 0.5, "momentum": 0.9, "wd": 1e-2, "clip_gradient": 0.3})
            x = nd.array(np.random.default_rng(4).standard_normal((8, 5)))
            for _ in range(4):
                with mx.autograd.record():
                    loss = (net(x) ** 2).sum()
                loss.backward()
                trainer.step(8)
            return [p.data().asnumpy() for p in net.collect_params().values()]
    for a, b in zip(train(True), train(False)):
        same_bits(a, b)


def test_bad_arrays_are_named(path):
    w = np.zeros(4, np.float32)
    with pytest.raises(ShapeError, match="sgd_update: grad has shape"):
        path.sgd_update(w, np.zeros(5, np.float32))
    with pytest.raises(DTypeError, match="sgd_update: grad has dtype float64 but weight"):
        path.sgd_update(w, np.zeros(4))
    with pytest.raises(DTypeError, match="sgd_update: mom has dtype"):
        path.sgd_update(w, np.zeros(4, np.float32), np.zeros(4))
    with pytest.raises(ValueError, match="sgd_update: weight .* is not C-contiguous"):
        path.sgd_update(np.zeros(8, np.float32)[::2], np.zeros(4, np.float32))
    with pytest.raises(ValueError, match="sgd_update: .*mom.*share"):
        path.sgd_update(w, np.zeros(4, np.float32), w)
    with pytest.raises(TypeError, match="sgd_update: lr must be a real number, got 'fast'"):
        path.sgd_update(w, np.zeros(4, np.float32), lr="fast")
