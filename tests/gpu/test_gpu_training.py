"""Training on the GPU gives what the CPU gives: a hybridized network on gpu(0) against
the same network run imperatively on cpu(0) (outputs and gradients), and a Trainer with
the 'device' kvstore over every GPU present against as many CPU devices. Results must live on the GPUs (gpukit.assert_on)."""
import json

import numpy as np
import pytest

import minigluon as mx
from minigluon import autograd, gluon, nd
from minigluon.gluon import nn
from minigluon.kvstore import KVStoreError

import gpukit

BATCH, STEPS = 8, 3
RTOL, ATOL = 1e-4, 1e-5     # float32 convolutions summed in another order on the GPU


def small_net():
    net = nn.HybridSequential()
    with net.name_scope():
        net.add(nn.Conv2D(4, 3, padding=1), nn.BatchNorm(), nn.Activation("relu"),
                nn.MaxPool2D(2), nn.Conv2D(6, 3), nn.Activation("tanh"),
                nn.GlobalAvgPool2D(), nn.Flatten(), nn.Dense(10))
    return net


@pytest.fixture(scope="module")
def init_file(tmp_path_factory):
    """One set of initial parameters for every run, made on the CPU."""
    net = small_net()
    net.initialize(mx.init.Xavier(), ctx=mx.cpu(0))
    net(nd.zeros((1, 1, 10, 10)))
    fname = str(tmp_path_factory.mktemp("gpu-init") / "small.params")
    net.save_parameters(fname)
    return fname


def batches(seed=0):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((BATCH, 1, 10, 10)).astype(np.float32),
             rng.integers(0, 10, BATCH).astype(np.float32)) for _ in range(STEPS)]


def values(net, ctx):
    return {name: p.data(ctx).asnumpy() for name, p in net._collect_params_with_prefix().items()}


def forward_backward(net, ctx, x, y):
    data, label = nd.array(x, ctx=ctx), nd.array(y, ctx=ctx)
    with autograd.record():
        out = net(data)
        loss = gluon.loss.SoftmaxCrossEntropyLoss()(out, label)
    recorded = [n["op"] for n in json.loads(autograd.get_symbol(out).tojson())["nodes"]
                if n["op"] != "null"]
    loss.backward()
    grads = {name: p.grad(ctx) for name, p in net._collect_params_with_prefix().items()
             if p.grad_req != "null"}
    return out, grads, recorded


def test_hybridized_net_on_gpu_matches_imperative_cpu(init_file, gpu0):
    x, y = batches()[0]
    want_net = small_net()
    want_net.load_parameters(init_file, ctx=mx.cpu(0))
    want_out, want_grads, _ = forward_backward(want_net, mx.cpu(0), x, y)
    net = small_net()
    net.load_parameters(init_file, ctx=gpu0)
    net.hybridize()
    with gpukit.device_paths():
        for _ in range(2):           # the second call runs the cached graph
            out, grads, recorded = forward_backward(net, gpu0, x, y)
    gpukit.sync()
    assert recorded == ["_CachedOp"], f"not one cached graph: {recorded}"
    gpukit.assert_on(out, gpu0, "hybridized output")
    np.testing.assert_allclose(out.asnumpy(), want_out.asnumpy(), rtol=RTOL, atol=ATOL)
    for name, grad in grads.items():
        gpukit.assert_on(grad, gpu0, f"gradient of {name}")
        np.testing.assert_allclose(grad.asnumpy(), want_grads[name].asnumpy(), rtol=RTOL,
                                   atol=ATOL, err_msg=name)


def train(ctxs, init_file, kvstore):
    net = small_net()
    net.load_parameters(init_file, ctx=ctxs)
    net.hybridize()
    trainer = gluon.Trainer(net.collect_params(), "sgd",
                            {"learning_rate": 0.1, "momentum": 0.9, "wd": 1e-4},
                            kvstore=kvstore)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    for x, y in batches():
        xs = gluon.utils.split_and_load(nd.array(x), ctxs)
        ys = gluon.utils.split_and_load(nd.array(y), ctxs)
        with autograd.record():
            losses = [loss_fn(net(a), b) for a, b in zip(xs, ys)]
        autograd.backward(losses)
        trainer.step(BATCH)
    gpukit.sync()
    return net


def test_trainer_with_device_kvstore_over_every_gpu_matches_cpus(init_file):
    """As many CPU devices as GPUs, so that BatchNorm sees the same per-device slices."""
    gpus = [mx.gpu(i) for i in range(gpukit.gpu_count())]
    cpus = [mx.cpu(i) for i in range(len(gpus))]
    cpu_net = train(cpus, init_file, "local")
    with gpukit.device_paths():
        net = train(gpus, init_file, "device")
    for ctx, cpu in zip(gpus, cpus):     # BatchNorm's running statistics are per device
        for name, p in net._collect_params_with_prefix().items():
            gpukit.assert_on(p.data(ctx), ctx, f"{name} on {ctx}")
        got, want = values(net, ctx), values(cpu_net, cpu)
        for name in want:
            np.testing.assert_allclose(got[name], want[name], rtol=RTOL, atol=ATOL,
                                       err_msg=f"{name} on {ctx} after {STEPS} steps")


def test_device_kvstore_sums_gpu_arrays_on_a_gpu():
    gpus = [mx.gpu(i) for i in range(gpukit.gpu_count())]
    kv = mx.kv.create("device")
    kv.init("w", nd.zeros((5, 3), ctx=gpus[0]))
    parts = [np.full((5, 3), i + 1.5, np.float32) for i in range(len(gpus))]
    kv.push("w", [nd.array(p, ctx=c) for p, c in zip(parts, gpus)])
    outs = [nd.zeros((5, 3), ctx=c) for c in gpus]
    kv.pull("w", out=outs)
    for out, ctx in zip(outs, gpus):
        gpukit.assert_on(out, ctx, f"pulled value on {ctx}")
        np.testing.assert_array_equal(out.asnumpy(), sum(parts))


def test_device_kvstore_refuses_compression_as_on_cpu():
    """In-process stores send no messages, so 2-bit compression is refused by name (the
    dist job in test_gpu_dist.py compresses GPU gradients)."""
    kv = mx.kv.create("device")
    with pytest.raises(KVStoreError, match="2bit.*not supported by the 'device' kvstore"):
        kv.set_gradient_compression({"type": "2bit", "threshold": 0.5})
