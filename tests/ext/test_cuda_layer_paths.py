"""The device paths of Convolution, Deconvolution, Pooling, relu and BatchNorm
(ndarray/conv_device.py, pool_device.py, the kernels' relu and BatchNorm maps), run through
the operators and autograd on NumPy arrays with the CUDA sources compiled for the CPU
standing in for the GPU (device_kernels._STAND_IN), against the same operators on their
host paths.

Where there is a GPU, the same comparisons run on CuPy arrays too (`where` = 'gpu'): the
whole path, device_kernels' `cupy` line, NVRTC and cuBLAS included.
"""
import numpy as np
import pytest

import minigluon as mx
from minigluon import autograd, nd
from minigluon.ndarray import conv_device
from minigluon.ndarray import device_kernels as device_module
from minigluon.ndarray.device_kernels import device_kernels
from minigluon_ext import gpu

import cuda_on_cpu
import kernel_backends

pytestmark = pytest.mark.skipif(cuda_on_cpu.compiler() is None, reason="needs g++")
# the device path on NumPy arrays (the CPU build of the kernels), and on a GPU's CuPy arrays
WHERE = ["stand_in", pytest.param("gpu", marks=pytest.mark.skipif(
    not kernel_backends.has_gpu(), reason="needs a GPU"))]

TOL = {np.float32: dict(rtol=2e-4, atol=2e-5), np.float64: dict(rtol=1e-10, atol=1e-12)}


@pytest.fixture(scope="module")
def stand_in():
    return gpu.Kernels(cuda_on_cpu.CpuBackend())


def run(stand_in, where, fn, inputs, dy_seed=9):
    """fn(*arrays) with gradients for every input: (output, [input gradients], the kernels
    the stand-in launched), where = 'stand_in' (the device path on NumPy arrays), 'gpu'
    (CuPy arrays) or 'host'."""
    before = len(stand_in.backend.launches)
    saved = device_module._STAND_IN
    device_module._STAND_IN = stand_in if where == "stand_in" else None
    ctx = mx.gpu(0) if where == "gpu" else mx.cpu()
    try:
        arrays = [nd.array(a, dtype=a.dtype, ctx=ctx) for a in inputs]
        for a in arrays:
            a.attach_grad()
        with autograd.record():
            y = fn(*arrays)
        dy = np.random.default_rng(dy_seed).standard_normal(y.shape).astype(y.dtype)
        y.backward(nd.array(dy, dtype=y.dtype, ctx=ctx))
    finally:
        device_module._STAND_IN = saved
    launched = {k for _, k, _ in stand_in.backend.launches[before:]}
    return y.asnumpy(), [a.grad.asnumpy() for a in arrays], launched


def same(got, want, dtype, exact=False):
    for g, w in zip(got, want):
        if exact:
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, **TOL[dtype])


# data shape, num_filter, kernel, stride, pad, dilate, num_group
CONVOLUTIONS = [
    ((2, 3, 9, 8), 4, (3, 3), (1, 1), (1, 1), (1, 1), 1),
    ((3, 4, 10, 9), 6, (3, 2), (2, 1), (1, 0), (2, 1), 2),
    ((2, 6, 7, 7), 6, (3, 3), (2, 2), (1, 1), (1, 1), 6),         # depthwise
    ((2, 5, 6, 6), 3, (1, 1), (1, 1), (0, 0), (1, 1), 1),         # 1x1
    ((1, 4, 5, 5), 8, (1, 1), (2, 2), (0, 0), (1, 1), 2),         # strided grouped 1x1
    ((2, 3, 23, 22), 4, (7, 7), (2, 2), (3, 3), (1, 1), 1),       # a ResNet stem
]


@pytest.mark.parametrize("where", WHERE)
@pytest.mark.parametrize("shape,f,kernel,stride,pad,dilate,groups", CONVOLUTIONS)
def test_convolution_on_the_device_path_is_the_host_convolution(
        stand_in, where, shape, f, kernel, stride, pad, dilate, groups):
    rng, dtype = np.random.default_rng(0), np.float64
    x = rng.standard_normal(shape).astype(dtype)
    w = rng.standard_normal((f, shape[1] // groups) + kernel).astype(dtype)
    b = rng.standard_normal(f).astype(dtype)

    def conv(x, w, b):
        return nd.Convolution(x, w, b, kernel=kernel, stride=stride, pad=pad, dilate=dilate,
                              num_filter=f, num_group=groups)
    y, grads, launched = run(stand_in, where, conv, [x, w, b])
    y_host, grads_host, _ = run(stand_in, "host", conv, [x, w, b])
    same([y] + grads, [y_host] + grads_host, dtype)
    if where == "stand_in":     # the stand-in counts its launches
        assert {"im2col_f64", "col2im_f64"} <= launched


# data shape, num_filter, kernel, stride, pad, adj, num_group, target_shape
DECONVOLUTIONS = [
    ((2, 4, 5, 6), 3, (4, 4), (2, 2), (1, 1), (0, 0), 1, ()),
    ((2, 4, 5, 5), 6, (3, 3), (2, 2), (1, 1), (1, 1), 2, ()),
    ((1, 3, 4, 7), 2, (3, 2), (1, 2), (0, 0), (0, 0), 1, (6, 13)),
]


@pytest.mark.parametrize("where", WHERE)
@pytest.mark.parametrize("shape,f,kernel,stride,pad,adj,groups,target", DECONVOLUTIONS)
def test_deconvolution_on_the_device_path_is_the_host_deconvolution(
        stand_in, where, shape, f, kernel, stride, pad, adj, groups, target):
    rng, dtype = np.random.default_rng(6), np.float64
    x = rng.standard_normal(shape).astype(dtype)
    w = rng.standard_normal((shape[1], f // groups) + kernel).astype(dtype)
    b = rng.standard_normal(f).astype(dtype)

    def deconv(x, w, b):
        return nd.Deconvolution(x, w, b, kernel=kernel, stride=stride, pad=pad, adj=adj,
                                target_shape=target, num_filter=f, num_group=groups,
                                no_bias=False)
    y, grads, launched = run(stand_in, where, deconv, [x, w, b])
    y_host, grads_host, _ = run(stand_in, "host", deconv, [x, w, b])
    same([y] + grads, [y_host] + grads_host, dtype)
    if where == "stand_in":     # the stand-in counts its launches
        assert {"im2col_f64", "col2im_f64"} <= launched


@pytest.mark.parametrize("where", WHERE)
def test_convolution_in_chunks_reuses_one_column_buffer_and_sums_the_weight_gradient(
        stand_in, where, monkeypatch):
    # columns of one sample per chunk: 5 chunks through one buffer
    monkeypatch.setattr(conv_device, "CHUNK_BYTES", 1)
    rng, dtype = np.random.default_rng(1), np.float32
    x = rng.standard_normal((5, 4, 8, 8)).astype(dtype)
    w = rng.standard_normal((6, 2, 3, 3)).astype(dtype)

    def conv(x, w):
        return nd.Convolution(x, w, kernel=(3, 3), pad=(1, 1), num_filter=6, num_group=2,
                              no_bias=True)
    before = len(stand_in.backend.launches)
    y, grads, _ = run(stand_in, where, conv, [x, w])
    calls = [k for _, k, _ in stand_in.backend.launches[before:]]
    if where == "stand_in":
        assert calls.count("im2col_f32") == 10 and calls.count("col2im_f32") == 5
    y_host, grads_host, _ = run(stand_in, "host", conv, [x, w])
    same([y] + grads, [y_host] + grads_host, dtype)


def test_a_convolution_the_kernels_do_not_take_keeps_its_path(stand_in):
    # 1-D, float16 and mixed dtypes run where they ran before
    x = np.random.default_rng(2).standard_normal((2, 3, 9)).astype(np.float64)
    w = np.ones((2, 3, 3), np.float64)
    conv = lambda x, w: nd.Convolution(x, w, kernel=(3,), num_filter=2, no_bias=True)
    y, grads, launched = run(stand_in, "stand_in", conv, [x, w])
    assert not launched
    assert device_kernels(np, x.astype(np.float16)) is None
    assert device_kernels(np, x, w.astype(np.float32)) is None


# data shape, kernel, stride, pad, convention, global_pool
POOLINGS = [
    ((2, 3, 8, 8), (2, 2), (2, 2), (0, 0), "valid", False),
    ((2, 3, 9, 7), (3, 3), (2, 2), (1, 1), "valid", False),
    ((1, 2, 9, 7), (3, 3), (2, 2), (1, 1), "full", False),
    ((2, 2, 5, 6), (3, 2), (1, 3), (1, 0), "full", False),
    ((2, 4, 6, 5), (), (), (), "valid", True),
]


@pytest.mark.parametrize("where", WHERE)
@pytest.mark.parametrize("pool_type", ["max", "avg", "sum"])
@pytest.mark.parametrize("shape,kernel,stride,pad,convention,global_pool", POOLINGS)
def test_pooling_on_the_device_path_is_the_host_pooling(
        stand_in, where, pool_type, shape, kernel, stride, pad, convention, global_pool):
    dtype = np.float32
    x = np.random.default_rng(3).standard_normal(shape).astype(dtype)
    x.reshape(-1)[::4] = 0.5          # ties: the first maximum takes the gradient

    def pool(x):
        return nd.Pooling(x, kernel=kernel, stride=stride, pad=pad, pool_type=pool_type,
                          pooling_convention=convention, global_pool=global_pool,
                          count_include_pad=pool_type != "avg" or convention == "valid")
    with np.errstate(divide="ignore", invalid="ignore"):     # 'full' windows of 0 positions
        y, grads, launched = run(stand_in, where, pool, [x])
        y_host, grads_host, _ = run(stand_in, "host", pool, [x])
    # max: the C kernel's bits; avg/sum: the NumPy path, which adds in another order
    same([y] + grads, [y_host] + grads_host, dtype, exact=pool_type == "max")
    name = "max_pool2d" if pool_type == "max" else "avg_pool2d"
    if where == "stand_in":     # the stand-in counts its launches
        assert {f"{name}_f32", f"{name}_backward_f32"} <= launched


@pytest.mark.parametrize("where", WHERE)
@pytest.mark.parametrize("act", ["relu", "Activation"])
def test_relu_on_the_device_path_is_the_host_relu_bit_for_bit(stand_in, where, act):
    x = np.random.default_rng(4).standard_normal((3, 5, 7)).astype(np.float32)
    x[0, 0, :4] = [0.0, -0.0, np.nan, np.inf]
    fn = nd.relu if act == "relu" else lambda x: nd.Activation(x, act_type="relu")
    y, grads, launched = run(stand_in, where, fn, [x])
    y_host, grads_host, _ = run(stand_in, "host", fn, [x])
    same([y] + grads, [y_host] + grads_host, np.float32, exact=True)
    if where == "stand_in":     # the stand-in counts its launches
        assert launched == {"relu_f32", "relu_backward_f32"}


def test_relu_second_order_gradients_keep_the_recorded_path(stand_in, monkeypatch):
    # create_graph runs the gradient formula on TracingXp: no kernels there
    monkeypatch.setattr(device_module, "_STAND_IN", stand_in)
    x = nd.array([-1.0, 2.0, 3.0])
    x.attach_grad()
    with autograd.record():
        y = nd.relu(x) * x
        (dx,) = autograd.grad(y.sum(), [x], create_graph=True)
    np.testing.assert_allclose(dx.asnumpy(), [0.0, 4.0, 6.0])


@pytest.mark.parametrize("where", WHERE)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("training,fix_gamma", [(True, False), (True, True), (False, False)])
def test_batch_norm_on_the_device_path_is_the_host_batch_norm(
        stand_in, where, dtype, training, fix_gamma):
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((4, 3, 5, 6)) * 2 + 1).astype(dtype)
    gamma, beta = rng.standard_normal(3).astype(dtype), rng.standard_normal(3).astype(dtype)
    moving = {}

    def bn(x, gamma, beta):
        mean = nd.array([0.5, -0.5, 0.0], dtype=dtype, ctx=x.context)
        var = nd.array([1.0, 2.0, 0.5], dtype=dtype, ctx=x.context)
        moving.setdefault("runs", []).append((mean, var))
        return nd.BatchNorm(x, gamma, beta, mean, var, fix_gamma=fix_gamma,
                            use_global_stats=not training)
    with autograd.train_mode() if training else autograd.predict_mode():
        y, grads, launched = run(stand_in, where, bn, [x, gamma, beta])
        y_host, grads_host, _ = run(stand_in, "host", bn, [x, gamma, beta])
    # float16 data normalizes in float32 on both paths, then rounds to float16
    tol_dtype = np.float32 if dtype == np.float16 else dtype
    loose = dict(rtol=2e-3, atol=2e-3) if dtype == np.float16 else TOL[dtype]
    for got, want in zip([y] + grads, [y_host] + grads_host):
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), **loose)
    (dev_mean, dev_var), (host_mean, host_var) = moving["runs"]
    same([dev_mean.asnumpy(), dev_var.asnumpy()], [host_mean.asnumpy(), host_var.asnumpy()],
         tol_dtype)
    suffix = "f64" if dtype == np.float64 else "f32"
    want = {f"batch_norm_forward_{suffix}", f"batch_norm_partial_sums_{suffix}"} | \
        ({f"batch_norm_backward_{suffix}"} if training else set())
    if where == "stand_in":
        assert launched == want


def test_simulated_gpus_keep_the_host_path(monkeypatch):
    monkeypatch.setenv("MINIGLUON_SIMULATED_GPUS", "1")
    monkeypatch.setattr(device_module, "_STAND_IN", None)
    x = nd.ones((1, 2, 4, 4), ctx=mx.gpu(0))
    assert isinstance(x._data, np.ndarray)
    assert device_kernels(x.context.xp, x._data) is None


def train_small_net(stand_in, where, hybridize, steps=2):
    """The (shape, value) of each parameter of a small conv net after `steps` SGD steps, on
    the device path ('stand_in', 'gpu') or the host path."""
    from minigluon import gluon
    from minigluon.gluon import nn
    saved = device_module._STAND_IN
    device_module._STAND_IN = stand_in if where == "stand_in" else None
    ctx = mx.gpu(0) if where == "gpu" else mx.cpu()
    try:
        mx.random.seed(7)
        net = nn.HybridSequential()
        net.add(nn.Conv2D(8, 3, padding=1, in_channels=3), nn.BatchNorm(in_channels=8),
                nn.Activation("relu"), nn.MaxPool2D(2),
                nn.Conv2D(8, 3, padding=1, groups=2, in_channels=8), nn.GlobalAvgPool2D(),
                nn.Dense(3, in_units=8))
        net.initialize(mx.init.Xavier(), ctx=mx.cpu())    # the same draws for every path
        net.reset_ctx(ctx)
        if hybridize:
            net.hybridize()
        trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
        rng = np.random.default_rng(11)
        loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
        for _ in range(steps):
            x = nd.array(rng.standard_normal((4, 3, 8, 8)), ctx=ctx)
            y = nd.array(rng.integers(0, 3, 4), ctx=ctx)
            with autograd.record():
                loss = loss_fn(net(x), y)
            loss.backward()
            trainer.step(4)
        return [(p.shape, p.data().asnumpy()) for p in net.collect_params().values()]
    finally:
        device_module._STAND_IN = saved


@pytest.mark.parametrize("where", WHERE)
@pytest.mark.parametrize("hybridize", [False, True])
def test_a_small_conv_net_trains_alike_on_the_device_path(stand_in, where, hybridize):
    before = len(stand_in.backend.launches)
    device = train_small_net(stand_in, where, hybridize)
    if where == "stand_in":
        launched = {k for _, k, _ in stand_in.backend.launches[before:]}
        assert {"im2col_f32", "col2im_f32", "max_pool2d_f32", "avg_pool2d_f32", "relu_f32",
                "batch_norm_forward_f32"} <= launched
    host = train_small_net(stand_in, "host", hybridize)
    assert [shape for shape, _ in device] == [shape for shape, _ in host]
    for k, ((_, got), (_, want)) in enumerate(zip(device, host)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=f"parameter {k}")
