"""The in-process kvstores 'local' and 'device': creation, init/push/pull semantics against
NumPy sums, updaters and optimizers, optimizer-state files, and the error messages."""
import numpy as np
import pytest

import minigluon as mx
from minigluon import nd
from minigluon.base import DTypeError, MXNetError, ShapeError
from minigluon.kvstore import KVStoreError
from minigluon.kvstore.reduce import reduce_sum as _reduce_sum

STORES = ["local", "device"]


@pytest.fixture
def gpus(monkeypatch):
    monkeypatch.setenv("MINIGLUON_SIMULATED_GPUS", "2")
    return [mx.gpu(0), mx.gpu(1)]


def _values(ctxs, shape=(2, 3), seed=0):
    rng = np.random.RandomState(seed)
    raw = [rng.randn(*shape).astype(np.float32) for _ in ctxs]
    return raw, [nd.array(r, ctx=c) for r, c in zip(raw, ctxs)]


# ---- creation -----------------------------------------------------------------------------
@pytest.mark.parametrize("name, cls", [("local", "KVStoreLocal"),
                                       ("local_allreduce_cpu", "KVStoreLocal"),
                                       ("device", "KVStoreDevice"),
                                       ("local_allreduce_device", "KVStoreDevice"),
                                       ("Device", "KVStoreDevice")])
def test_create_names_and_aliases(name, cls):
    kv = mx.kv.create(name)
    assert type(kv).__name__ == cls
    assert isinstance(kv, mx.kv.KVStore)
    assert kv.type == name.lower()
    assert (kv.rank, kv.num_workers) == (0, 1)
    kv.barrier()
    assert kv.is_capable("optimizer") and kv.is_capable(mx.kv.KVStore.OPTIMIZER)


def test_default_store_is_local():
    assert mx.kv.create().type == "local"


def test_unknown_store_and_capability():
    with pytest.raises(KVStoreError, match="unknown kvstore type 'gossip'.*'local'"):
        mx.kv.create("gossip")
    with pytest.raises(KVStoreError, match="must be a str"):
        mx.kv.create(3)
    with pytest.raises(KVStoreError, match="unknown kvstore capability 'sparse'"):
        mx.kv.create().is_capable("sparse")


# ---- the reduction ------------------------------------------------------------------------
def test_reduce_sum_matches_numpy():
    rng = np.random.RandomState(1)
    arrays = [rng.randn(5, 4).astype(np.float32) for _ in range(3)]
    out = np.full((5, 4), 7.0, dtype=np.float32)
    _reduce_sum(arrays, out)
    np.testing.assert_array_equal(out, (arrays[0] + arrays[1]) + arrays[2])


# ---- init / push / pull -------------------------------------------------------------------
@pytest.mark.parametrize("name", STORES)
@pytest.mark.parametrize("device_kind", ["cpu", "gpu"])
def test_push_sums_devices_and_pull_copies_to_each(name, device_kind, gpus):
    ctxs = gpus if device_kind == "gpu" else [mx.cpu(0), mx.cpu(1)]
    kv = mx.kv.create(name)
    kv.init(3, nd.zeros((2, 3)))
    raw, vals = _values(ctxs)
    kv.push(3, vals)
    outs = [nd.zeros((2, 3), ctx=c) for c in ctxs]
    kv.pull(3, out=outs)
    for out, ctx in zip(outs, ctxs):
        assert out.context == ctx
        np.testing.assert_allclose(out.asnumpy(), raw[0] + raw[1], rtol=1e-6)


@pytest.mark.parametrize("name", STORES)
def test_push_without_updater_replaces_the_value(name):
    kv = mx.kv.create(name)
    kv.init("w", nd.ones((4,)) * 10)
    kv.push("w", [nd.ones((4,)), nd.ones((4,), ctx=mx.cpu(1))])
    kv.push("w", [nd.ones((4,)) * 3, nd.ones((4,), ctx=mx.cpu(1))])
    out = nd.zeros((4,))
    kv.pull("w", out=out)
    np.testing.assert_array_equal(out.asnumpy(), np.full(4, 4.0, np.float32))


@pytest.mark.parametrize("name", STORES)
def test_pulled_arrays_are_copies(name):
    kv = mx.kv.create(name)
    value = nd.ones((3,))
    kv.init(0, value)
    value[:] = 5                      # changing the initial array does not reach the store
    out = nd.zeros((3,))
    kv.pull(0, out=out)
    out[:] = 9                        # nor does changing a pulled array
    again = nd.zeros((3,))
    kv.pull(0, out=again)
    np.testing.assert_array_equal(again.asnumpy(), np.ones(3, np.float32))


@pytest.mark.parametrize("name", STORES)
def test_lists_of_keys_with_lists_of_values(name):
    kv = mx.kv.create(name)
    kv.init([5, 7], [nd.zeros((2,)), nd.zeros((3,))])
    a = [nd.ones((2,)), nd.ones((2,), ctx=mx.cpu(1)) * 2]
    b = [nd.ones((3,)) * 3, nd.ones((3,), ctx=mx.cpu(1)) * 4]
    kv.push([5, 7], [a, b])
    out5 = [nd.zeros((2,)), nd.zeros((2,), ctx=mx.cpu(1))]
    out7 = nd.zeros((3,))
    kv.pull([5, 7], out=[out5, out7])
    assert [o.asnumpy().tolist() for o in out5] == [[3, 3], [3, 3]]
    assert out7.asnumpy().tolist() == [7, 7, 7]


def test_a_key_repeated_in_one_push_sums_all_its_values():
    kv = mx.kv.create("local")
    kv.init(1, nd.zeros((2,)))
    kv.push([1, 1], [nd.ones((2,)), [nd.ones((2,)), nd.ones((2,), ctx=mx.cpu(1))]])
    out = nd.zeros((2,))
    kv.pull(1, out=out)
    assert out.asnumpy().tolist() == [3, 3]


@pytest.mark.parametrize("name", STORES)
def test_pushpull_and_broadcast(name):
    kv = mx.kv.create(name)
    kv.broadcast("b", nd.ones((2,)) * 6, out=[nd.zeros((2,)), nd.zeros((2,), ctx=mx.cpu(1))])
    vals = [nd.ones((2,)), nd.ones((2,), ctx=mx.cpu(1)) * 2]
    kv.pushpull("b", vals)                       # out=None: the sum lands in the values
    assert [v.asnumpy().tolist() for v in vals] == [[3, 3], [3, 3]]
    out = nd.zeros((2,), ctx=mx.cpu(1))
    kv.pushpull("b", [nd.ones((2,)), nd.ones((2,))], out=out)
    assert out.asnumpy().tolist() == [2, 2] and out.context == mx.cpu(1)
    outs = [nd.zeros((2,)), nd.zeros((2,), ctx=mx.cpu(1))]
    kv.broadcast("c", nd.ones((2,)) * 4, out=outs)
    assert [o.asnumpy().tolist() for o in outs] == [[4, 4], [4, 4]]


# ---- updaters and optimizers --------------------------------------------------------------
@pytest.mark.parametrize("name", STORES)
def test_updater_gets_the_merged_gradient_and_the_stored_weight(name):
    kv = mx.kv.create(name)
    kv.init(9, nd.ones((2,)))
    calls = []

    def updater(key, grad, weight):
        calls.append((key, grad.asnumpy().tolist(), weight.context))
        weight[:] = weight - 0.5 * grad

    kv.set_updater(updater)
    kv.push(9, [nd.ones((2,)), nd.ones((2,), ctx=mx.cpu(1)) * 3])
    out = nd.zeros((2,))
    kv.pull(9, out=out)
    assert calls[0][:2] == (9, [4.0, 4.0])
    assert out.asnumpy().tolist() == [-1.0, -1.0]


def test_local_updates_on_cpu_and_device_spreads_keys_over_devices(gpus):
    contexts = {}

    def updater(key, grad, weight):
        contexts[key] = (weight.context, grad.context)

    for name in STORES:
        kv = mx.kv.create(name)
        kv._set_updater(updater)
        for key in (0, 1):
            kv.init(key, nd.zeros((4,)))
            kv.push(key, [nd.ones((4,), ctx=g) for g in gpus])
        if name == "local":
            assert contexts == {0: (mx.cpu(0), mx.cpu(0)), 1: (mx.cpu(0), mx.cpu(0))}
        else:
            assert contexts == {0: (gpus[0], gpus[0]), 1: (gpus[1], gpus[1])}


@pytest.mark.parametrize("name", STORES)
def test_set_optimizer_matches_numpy_sgd(name):
    kv = mx.kv.create(name)
    w0 = np.arange(6, dtype=np.float32).reshape(2, 3)
    kv.init("w", nd.array(w0))
    kv.set_optimizer(mx.optimizer.SGD(learning_rate=0.1, momentum=0.9, rescale_grad=0.5))
    raw, vals = _values([mx.cpu(0), mx.cpu(1)])
    mom, w = np.zeros_like(w0), w0.copy()
    for _ in range(3):
        kv.push("w", vals)
        mom = 0.9 * mom - 0.1 * (0.5 * (raw[0] + raw[1]))
        w = w + mom
    out = nd.zeros((2, 3), ctx=mx.cpu(1))
    kv.pull("w", out=out)
    np.testing.assert_allclose(out.asnumpy(), w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", STORES)
def test_optimizer_states_round_trip(name, tmp_path):
    def run(kv, steps):
        for step in range(steps):
            kv.push(0, [nd.ones((3,)) * (step + 1), nd.ones((3,), ctx=mx.cpu(1))])

    kv = mx.kv.create(name)
    kv.init(0, nd.ones((3,)))
    kv.set_optimizer(mx.optimizer.Adam(learning_rate=0.01))
    run(kv, 2)
    fname = str(tmp_path / "states")
    kv.save_optimizer_states(fname, dump_optimizer=True)
    current = nd.zeros((3,))
    kv.pull(0, out=current)
    run(kv, 2)
    expected = nd.zeros((3,))
    kv.pull(0, out=expected)

    kv2 = mx.kv.create(name)
    kv2.init(0, current)
    kv2.set_optimizer(mx.optimizer.Adam(learning_rate=0.5))   # replaced by the dumped one
    kv2.load_optimizer_states(fname)
    run(kv2, 2)
    got = nd.zeros((3,))
    kv2.pull(0, out=got)
    np.testing.assert_array_equal(got.asnumpy(), expected.asnumpy())


def test_optimizer_states_need_an_optimizer(tmp_path):
    kv = mx.kv.create("local")
    with pytest.raises(KVStoreError, match="call set_optimizer"):
        kv.save_optimizer_states(str(tmp_path / "s"))
    with pytest.raises(KVStoreError, match="must be callable"):
        kv.set_updater("sgd")


# ---- gradient compression -----------------------------------------------------------------
@pytest.mark.parametrize("params, match", [
    ("2bit", "must be a dict with a 'type' key"),
    ({"threshold": 0.5}, "must be a dict with a 'type' key"),
    ({"type": "3bit"}, "unknown gradient compression type '3bit'"),
    ({"type": "2bit", "threshold": 0}, r"must be a number > 0, got 0"),
    ({"type": "2bit", "threshold": "high"}, "must be a number"),
    ({"type": "2bit", "bits": 2}, r"does not take \['bits'\]"),
])
def test_compression_params_are_validated(params, match):
    with pytest.raises(KVStoreError, match=match):
        mx.kv.create("device").set_gradient_compression(params)


@pytest.mark.parametrize("name", STORES)
def test_local_stores_reject_compression_clearly(name):
    kv = mx.kv.create(name)
    kv.set_gradient_compression({"type": "none"})
    with pytest.raises(KVStoreError, match=f"'2bit' is not supported by the '{name}' kvstore"):
        kv.set_gradient_compression({"type": "2bit", "threshold": 0.5})


# ---- errors -------------------------------------------------------------------------------
@pytest.mark.parametrize("name", STORES)
def test_uninitialized_and_duplicate_keys(name):
    kv = mx.kv.create(name)
    with pytest.raises(KVStoreError, match=r"push to key 3: the key has not been initialized; "
                                           r"call kv.init\(3, value\) first"):
        kv.push(3, nd.ones((2,)))
    with pytest.raises(KVStoreError, match="pull from key 'w': the key has not been initialized"):
        kv.pull("w", out=nd.ones((2,)))
    kv.init(3, nd.ones((2,)))
    with pytest.raises(KVStoreError, match="init of key 3: the key is already initialized"):
        kv.init(3, nd.ones((2,)))
    with pytest.raises(KVStoreError, match="init of key 4: expected one value, got 2"):
        kv.init(4, [nd.ones((2,)), nd.ones((2,))])


@pytest.mark.parametrize("name", STORES)
def test_shape_and_dtype_mismatch(name):
    kv = mx.kv.create(name)
    kv.init(3, nd.zeros((10, 4)))
    with pytest.raises(ShapeError, match=r"^push to key 3: shape \(10, 5\) does not match the "
                                         r"initialized shape \(10, 4\)$"):
        kv.push(3, [nd.zeros((10, 4)), nd.zeros((10, 5))])
    with pytest.raises(ShapeError, match=r"pull from key 3: shape \(4,\) does not match"):
        kv.pull(3, out=nd.zeros((4,)))
    with pytest.raises(DTypeError, match="dtype float64 does not match the initialized dtype "
                                         "float32"):
        kv.push(3, nd.zeros((10, 4), dtype="float64"))


def test_bad_keys_and_values():
    kv = mx.kv.create("local")
    with pytest.raises(KVStoreError, match="a key must be an int or a str, got 1.5"):
        kv.init(1.5, nd.ones((2,)))
    with pytest.raises(KVStoreError, match="2 keys need a list of 2 values"):
        kv.init([1, 2], nd.ones((2,)))
    with pytest.raises(KVStoreError, match="expected an NDArray or a non-empty list"):
        kv.init(1, np.ones(2))
    kv.init(np.int64(1), nd.ones((2,)))
    with pytest.raises(KVStoreError, match="pull needs out="):
        kv.pull(1)
    with pytest.raises(KVStoreError, match="expected an NDArray or a non-empty list"):
        kv.push(1, [])


@pytest.mark.parametrize("name", ["local", "device"])
def test_big_array_sum_goes_through_minigluon_ext_and_matches_numpy(name):
    import minigluon_ext
    rng = np.random.default_rng(0)
    parts = [rng.standard_normal(1_200_001).astype(np.float32) for _ in range(3)]
    kv = mx.kv.create(name)
    kv.init(0, mx.nd.zeros((1_200_001,)))
    kv.push(0, [mx.nd.array(p, ctx=mx.cpu(i)) for i, p in enumerate(parts)])
    out = mx.nd.zeros((1_200_001,))
    kv.pull(0, out=out)
    np.testing.assert_array_equal(out.asnumpy(), (parts[0] + parts[1]) + parts[2])
    assert minigluon_ext.backend() in ("c", "numpy")
