"""The columns path one sample at a time (conv_host.HostConv with per_sample: each
sample's matmul writes its NCHW output, and reads its dy, in place) shape by shape against
the plain path, its gradients against finite differences, and the shapes that take it."""
import numpy as np
import pytest

from minigluon import autograd, nd
from minigluon.ndarray import conv_host
from minigluon.ndarray.conv_window import Window

from test_ops_conv import check_gradients

CASES = [  # data shape, filters, kernel, stride, pad, bias
    ((3, 4, 9, 9), 6, (3, 3), (2, 2), (1, 1), True),        # ResNet's stride-2 3x3, shrunk
    ((2, 3, 12, 12), 5, (7, 7), (2, 2), (3, 3), False),     # the 7x7 stem, shrunk
    ((4, 3, 8, 8), 8, (3, 3), (1, 1), (1, 1), True),        # the CIFAR stem, shrunk
    ((2, 2, 7, 6), 3, (2, 3), (1, 2), (0, 1), False),
]


def _run(case, dtype, path, monkeypatch):
    """(y, dx, dw[, db]) on the named host path (None: the operator's NumPy columns)."""
    shape, f, kernel, stride, pad, bias = case
    rng = np.random.default_rng(6)
    arrays = [rng.standard_normal(shape), rng.standard_normal((f, shape[1]) + kernel)]
    arrays += [rng.standard_normal(f)] if bias else []
    with monkeypatch.context() as m:
        m.setattr(conv_host, "_PATH", path)
        m.setattr(conv_host, "_HOST_KERNELS", path is not None)
        variables = [nd.array(a, dtype=dtype) for a in arrays]
        for v in variables:
            v.attach_grad()
        with autograd.record():
            y = nd.Convolution(*variables, kernel=kernel, stride=stride, pad=pad,
                               num_filter=f, no_bias=not bias)
        y.backward(nd.array(rng.standard_normal(y.shape), dtype=dtype))
    return [y.asnumpy()] + [v.grad.asnumpy() for v in variables]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[0])) + f"k{c[2]}")
def test_samples_path_matches_the_plain_path(case, dtype, monkeypatch):
    tol = 2e-4 if dtype == "float32" else 1e-11
    for name, got, want in zip(("y", "dx", "dw", "db"), _run(case, dtype, "samples", monkeypatch),
                               _run(case, dtype, None, monkeypatch)):
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=name)


def test_samples_path_gradients_match_finite_differences(monkeypatch):
    monkeypatch.setattr(conv_host, "_PATH", "samples")
    rng = np.random.default_rng(7)
    arrays = [rng.standard_normal((2, 2, 5, 5)), rng.standard_normal((3, 2, 3, 3)),
              rng.standard_normal(3)]
    check_gradients(lambda *a: nd.Convolution(*a, kernel=(3, 3), stride=(2, 2), pad=(1, 1),
                                              num_filter=3), arrays)


def _window(size, kernel=(3, 3), stride=(1, 1), pad=(1, 1)):
    return Window.sliding("test", kernel, stride, (1, 1), pad, (size, size))


def test_host_conv_builds_one_sample_chunks_for_the_samples_path(monkeypatch):
    win = _window(56, stride=(2, 2))
    monkeypatch.setattr(conv_host, "_PATH", "samples")
    conv = conv_host.host_conv(win, 1, 64, np.float32)
    assert type(conv) is conv_host.HostConv and conv.step == 1
    monkeypatch.setattr(conv_host, "_PATH", "columns")
    assert conv_host.host_conv(win, 1, 64, np.float32).step > 1


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("size,channels,kernel,stride,pad,path", [
    (32, 3, (3, 3), (1, 1), (1, 1), "samples"),       # the CIFAR stem: 27 rows, 1024 outputs
    (28, 1, (5, 5), (1, 1), (0, 0), "columns"),       # LeNet's first layer: 576 outputs
    (224, 3, (7, 7), (2, 2), (3, 3), "columns"),      # the 7x7 stem: 147 rows
    (56, 64, (3, 3), (2, 2), (1, 1), "columns"),      # ResNet's stride-2 3x3: 576 rows
    (56, 64, (3, 3), (1, 1), (1, 1), "winograd"),
    (7, 128, (3, 3), (1, 1), (1, 1), "winograd"),     # DenseNet's 3x3 128 -> 32
])
def test_host_conv_chooses_by_shape(size, channels, kernel, stride, pad, path, threads,
                                    monkeypatch):
    monkeypatch.setattr(conv_host, "compute_threads", lambda: threads)
    conv = conv_host.host_conv(_window(size, kernel, stride, pad), 1, channels, np.float32)
    if path == "winograd":
        assert type(conv) is conv_host.HostWinograd
        return
    assert type(conv) is conv_host.HostConv
    if path == "samples":       # on two threads the CIFAR stem keeps its batched columns
        assert (conv.step == 1) == (threads == 1)
    elif kernel != (7, 7):      # (a 7x7 stem's sample fills a chunk by itself)
        assert conv.step > 1


def test_a_forced_path_that_does_not_apply_is_refused(monkeypatch):
    monkeypatch.setattr(conv_host, "_PATH", "winograd4")
    with pytest.raises(ValueError, match=r"conv_host._PATH='winograd4' does not apply to "
                                         r"kernel \(3, 3\) stride \(2, 2\)"):
        conv_host.host_conv(_window(56, stride=(2, 2)), 1, 64, np.float32)
