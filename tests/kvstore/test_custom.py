"""User-defined kvstores: the abstract KVStoreBase protocol, `KVStoreBase.register` and
`mx.kv.create` by class name, and the registered 'teststore' against NumPy sums."""
import warnings

import numpy as np
import pytest

import minigluon as mx
from minigluon import nd
from minigluon.kvstore import KVStoreError


@pytest.fixture
def registry():
    """Registrations made by a test are undone after it."""
    saved = dict(mx.kv.KVStoreBase.kv_registry)
    yield mx.kv.KVStoreBase.kv_registry
    mx.kv.KVStoreBase.kv_registry.clear()
    mx.kv.KVStoreBase.kv_registry.update(saved)


def _values(ctxs, shape=(2, 3), seed=0):
    rng = np.random.RandomState(seed)
    raw = [rng.randn(*shape).astype(np.float32) for _ in ctxs]
    return raw, [nd.array(r, ctx=c) for r, c in zip(raw, ctxs)]


# ---- the protocol and the registry ----------------------------------------------------------
def test_builtin_stores_follow_the_protocol():
    kv = mx.kv.create("local")
    assert isinstance(kv, mx.kv.KVStoreBase) and isinstance(kv, mx.kv.KVStore)
    assert not isinstance(mx.kv.create("teststore"), mx.kv.KVStore)


def test_register_then_create_by_lowercase_class_name(registry):
    @mx.kv.KVStoreBase.register
    class EchoStore(mx.kv.KVStoreBase):
        def broadcast(self, key, value, out, priority=0):
            out[...] = value

        @property
        def type(self):
            return "echostore"

    assert registry["echostore"] is EchoStore
    kv = mx.kv.create("EchoStore")
    assert type(kv) is EchoStore and kv.type == "echostore"
    out = nd.zeros((2,))
    kv.broadcast(0, nd.array([1.0, 2.0]), out)
    np.testing.assert_array_equal(out.asnumpy(), [1.0, 2.0])


def test_unimplemented_operations_name_the_class(registry):
    @mx.kv.KVStoreBase.register
    class Empty(mx.kv.KVStoreBase):
        pass

    kv = mx.kv.create("empty")
    with pytest.raises(NotImplementedError, match="Empty does not implement pushpull"):
        kv.pushpull(0, nd.ones((1,)))
    for call in (lambda: kv.broadcast(0, nd.ones((1,)), nd.ones((1,))),
                 lambda: kv.is_capable("optimizer"), lambda: kv.set_optimizer(None),
                 lambda: kv.save_optimizer_states("f"), lambda: kv.load_optimizer_states("f"),
                 lambda: kv.type, lambda: kv.rank, lambda: kv.num_workers):
        with pytest.raises(NotImplementedError):
            call()


def test_register_twice_warns_and_replaces(registry):
    class Twin(mx.kv.KVStoreBase):
        pass

    first = mx.kv.KVStoreBase.register(Twin)

    class Twin(mx.kv.KVStoreBase):   # noqa: F811  (a second class of the same name)
        pass

    with pytest.warns(UserWarning, match="replaces the registered kvstore"):
        mx.kv.KVStoreBase.register(Twin)
    assert registry["twin"] is Twin and Twin is not first
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mx.kv.KVStoreBase.register(Twin)      # the same class again: silent


def test_register_needs_a_class_and_unknown_names_list_registered_ones():
    with pytest.raises(TypeError, match="register takes a class, got 3"):
        mx.kv.KVStoreBase.register(3)
    with pytest.raises(KVStoreError, match="unknown kvstore type 'nope'.*'teststore'"):
        mx.kv.create("nope")


# ---- teststore --------------------------------------------------------------------------------
def test_teststore_identity_and_capabilities():
    kv = mx.kv.create("teststore")
    assert (kv.type, kv.rank, kv.num_workers) == ("teststore", 0, 1)
    assert type(kv).is_capable("optimizer") is False
    with pytest.raises(KVStoreError, match="unknown kvstore capability 'sparse'"):
        kv.is_capable("sparse")
    with pytest.raises(NotImplementedError, match="set_optimizer"):
        kv.set_optimizer(mx.optimizer.create("sgd"))
    with pytest.raises(NotImplementedError, match="save_optimizer_states"):
        kv.save_optimizer_states("states")


def test_teststore_pushpull_sums_like_numpy():
    ctxs = [mx.cpu(i) for i in range(3)]
    raw, vals = _values(ctxs)
    outs = [nd.zeros((2, 3), ctx=c) for c in ctxs]
    kv = mx.kv.create("teststore")
    kv.pushpull("w", vals, out=outs)
    for out in outs:
        np.testing.assert_allclose(out.asnumpy(), np.sum(raw, axis=0), rtol=1e-6)
        assert out.context in ctxs
    kv.pushpull("w", vals)                       # in place
    for val in vals:
        np.testing.assert_allclose(val.asnumpy(), np.sum(raw, axis=0), rtol=1e-6)


def test_teststore_broadcast_and_key_lists():
    kv = mx.kv.create("teststore")
    outs = [[nd.zeros((2,)), nd.zeros((2,))], [nd.zeros((2,))]]
    kv.broadcast([1, 2], [nd.array([1.0, 2.0]), nd.array([3.0, 4.0])], out=outs)
    np.testing.assert_array_equal([o.asnumpy() for o in outs[0]], [[1, 2], [1, 2]])
    np.testing.assert_array_equal(outs[1][0].asnumpy(), [3, 4])


def test_teststore_bad_input():
    kv = mx.kv.create("teststore")
    with pytest.raises(KVStoreError, match="broadcast of key 0: expected one value"):
        kv.broadcast(0, [nd.ones((1,)), nd.ones((1,))], out=nd.ones((1,)))
    with pytest.raises(KVStoreError, match="pushpull key 0: expected an NDArray"):
        kv.pushpull(0, [3.0])
