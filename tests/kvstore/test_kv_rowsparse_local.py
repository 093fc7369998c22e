"""row_sparse values in the in-process kvstores: pushes summed keeping sparsity, pulls into
dense and row_sparse outputs, row_sparse_pull of exactly the asked rows, and the errors."""
import numpy as np
import pytest

import minigluon as mx
from minigluon import nd
from minigluon.base import MXNetError
from minigluon.kvstore import KVStoreError

STORES = ["local", "device"]
SHAPE = (6, 3)


def _rsp(rows, shape=SHAPE, scale=1.0, ctx=None):
    """A row_sparse array storing `rows`, row r filled with scale * (r + 1)."""
    data = np.array([np.full(shape[1:], scale * (r + 1)) for r in rows], np.float32)
    data = data.reshape((len(rows),) + shape[1:])
    return nd.sparse.row_sparse_array((data, rows), shape=shape, ctx=ctx)


def _dense_of_rows(rows, shape=SHAPE, scale=1.0):
    out = np.zeros(shape, np.float32)
    for r in rows:
        out[r] = scale * (r + 1)
    return out


@pytest.fixture
def gpus(monkeypatch):
    monkeypatch.setenv("MINIGLUON_SIMULATED_GPUS", "2")
    return [mx.gpu(0), mx.gpu(1)]


@pytest.mark.parametrize("name", STORES)
def test_push_of_devices_sums_keeping_sparsity(name):
    kv = mx.kv.create(name)
    kv.init("w", nd.sparse.zeros("row_sparse", SHAPE))
    seen = []
    kv.set_updater(lambda key, grad, weight: seen.append((grad.stype, grad.indices.asnumpy(),
                                                          grad.asnumpy())))
    kv.push("w", [_rsp([1, 4], ctx=mx.cpu(0)), _rsp([4, 5], ctx=mx.cpu(1), scale=2.0)])
    stype, indices, dense = seen[0]
    assert stype == "row_sparse"
    assert indices.tolist() == [1, 4, 5]
    np.testing.assert_array_equal(dense, _dense_of_rows([1, 4]) +
                                  _dense_of_rows([4, 5], scale=2.0))


@pytest.mark.parametrize("name", STORES)
def test_push_without_updater_replaces_in_the_keys_storage(name):
    kv = mx.kv.create(name)
    kv.init(0, nd.ones(SHAPE))                       # dense key
    kv.init(1, nd.ones(SHAPE).tostype("row_sparse"))  # row_sparse key
    kv.push(0, [_rsp([2]), _rsp([3])])
    kv.push(1, nd.array(_dense_of_rows([0, 5])))
    dense = nd.zeros(SHAPE)
    kv.pull(0, out=dense)
    np.testing.assert_array_equal(dense.asnumpy(), _dense_of_rows([2, 3]))
    out = nd.sparse.zeros("row_sparse", SHAPE)
    kv.pull(1, out=out, ignore_sparse=False)
    assert out.stype == "row_sparse" and out.indices.asnumpy().tolist() == [0, 5]
    np.testing.assert_array_equal(out.asnumpy(), _dense_of_rows([0, 5]))


@pytest.mark.parametrize("name", STORES)
def test_pull_skips_row_sparse_outs_unless_asked(name):
    kv = mx.kv.create(name)
    kv.init(3, nd.ones(SHAPE) * 5)
    dense, sparse = nd.zeros(SHAPE), _rsp([1])
    kv.pull(3, out=[dense, sparse])                  # ignore_sparse=True: sparse untouched
    np.testing.assert_array_equal(dense.asnumpy(), np.full(SHAPE, 5.0))
    np.testing.assert_array_equal(sparse.asnumpy(), _dense_of_rows([1]))
    kv.pull(3, out=sparse, ignore_sparse=False)
    np.testing.assert_array_equal(sparse.asnumpy(), np.full(SHAPE, 5.0))
    csr = nd.sparse.zeros("csr", SHAPE)
    with pytest.raises(KVStoreError, match="pull from key 3: cannot pull into a csr array"):
        kv.pull(3, out=csr, ignore_sparse=False)


@pytest.mark.parametrize("name", STORES)
@pytest.mark.parametrize("key_stype", ["default", "row_sparse"])
def test_row_sparse_pull_gives_exactly_the_asked_rows(name, key_stype):
    kv = mx.kv.create(name)
    value = _dense_of_rows([0, 2, 3])
    kv.init("e", nd.array(value).tostype(key_stype))
    out = _rsp([5])                                   # its old rows are replaced
    kv.row_sparse_pull("e", out=out, row_ids=nd.array([[3, 1], [3, 0]]))
    assert out.stype == "row_sparse"
    assert out.indices.asnumpy().tolist() == [0, 1, 3]   # sorted, unique, row 1 stored as 0
    expected = np.zeros(SHAPE, np.float32)
    expected[[0, 1, 3]] = value[[0, 1, 3]]
    np.testing.assert_array_equal(out.asnumpy(), expected)
    out.check_format()


@pytest.mark.parametrize("name", STORES)
def test_row_sparse_pull_lists_of_outs_and_keys(name):
    kv = mx.kv.create(name)
    kv.init(["a", "b"], [nd.array(_dense_of_rows(range(6))), nd.array(_dense_of_rows([1]))])
    outs = [nd.sparse.zeros("row_sparse", SHAPE, ctx=mx.cpu(i)) for i in range(3)]
    kv.row_sparse_pull("a", out=outs, row_ids=nd.array([4]))        # one ids array for all
    for i, out in enumerate(outs):
        assert out.context == mx.cpu(i)
        assert out.indices.asnumpy().tolist() == [4]
    ids = [nd.array([0]), nd.array([1, 2]), nd.array([], dtype="int64")]
    kv.row_sparse_pull("a", out=outs, row_ids=ids)                  # one per out
    assert [o.indices.asnumpy().tolist() for o in outs] == [[0], [1, 2], []]
    np.testing.assert_array_equal(outs[2].asnumpy(), np.zeros(SHAPE))
    a_out, b_outs = nd.sparse.zeros("row_sparse", SHAPE), outs[:2]
    kv.row_sparse_pull(["a", "b"], out=[a_out, b_outs],
                       row_ids=[nd.array([5]), [nd.array([1]), nd.array([0, 1])]])
    np.testing.assert_array_equal(a_out.asnumpy(), _dense_of_rows([5]))
    np.testing.assert_array_equal(b_outs[0].asnumpy(), _dense_of_rows([1]))
    assert b_outs[1].indices.asnumpy().tolist() == [0, 1]


def test_row_sparse_pull_on_simulated_gpus(gpus):
    kv = mx.kv.create("device")
    kv.init(0, nd.sparse.zeros("row_sparse", SHAPE, ctx=gpus[0]))
    kv.push(0, [_rsp([1], ctx=gpus[0]), _rsp([1, 2], ctx=gpus[1])])
    outs = [nd.sparse.zeros("row_sparse", SHAPE, ctx=g) for g in gpus]
    kv.row_sparse_pull(0, out=outs, row_ids=nd.array([1, 2]))
    for out, ctx in zip(outs, gpus):
        assert out.context == ctx and out.stype == "row_sparse"
        np.testing.assert_array_equal(out.asnumpy(), 2 * _dense_of_rows([1]) +
                                      _dense_of_rows([2]))


@pytest.mark.parametrize("name", STORES)
@pytest.mark.parametrize("key_stype", ["default", "row_sparse"])
def test_updater_gets_the_row_sparse_sum_and_the_stored_weight(name, key_stype):
    kv = mx.kv.create(name)
    kv.init(7, nd.ones(SHAPE).tostype(key_stype))
    calls = []

    def updater(key, grad, weight):
        calls.append((key, grad.stype, weight.stype))
        weight += grad * 2

    kv.set_updater(updater)
    for _ in range(2):
        kv.push(7, [_rsp([0]), _rsp([0, 4])])
    assert calls == [(7, "row_sparse", key_stype)] * 2
    out = nd.zeros(SHAPE)
    kv.pull(7, out=out)
    np.testing.assert_array_equal(out.asnumpy(), 1 + 2 * 2 * (2 * _dense_of_rows([0]) +
                                                              _dense_of_rows([4])))


@pytest.mark.parametrize("name", STORES)
def test_row_sparse_pull_errors(name):
    kv = mx.kv.create(name)
    kv.init(3, nd.ones(SHAPE))
    out = nd.sparse.zeros("row_sparse", SHAPE)
    with pytest.raises(KVStoreError, match=r"row_sparse_pull of key 3: out must be a "
                                           r"row_sparse array, got a default one"):
        kv.row_sparse_pull(3, out=nd.zeros(SHAPE), row_ids=nd.array([1]))
    with pytest.raises(KVStoreError, match=r"row ids \[6, -1\] are out of range for a value "
                                           r"of 6 rows; ids must be in \[0, 6\)"):
        kv.row_sparse_pull(3, out=out, row_ids=nd.array([1, 6, -1]))
    with pytest.raises(KVStoreError, match=r"row ids must be whole numbers, got \[1.5\]"):
        kv.row_sparse_pull(3, out=out, row_ids=nd.array([1.5]))
    with pytest.raises(KVStoreError, match="needs row_ids="):
        kv.row_sparse_pull(3, out=out)
    with pytest.raises(KVStoreError, match="row_ids must be an NDArray or a list of 2"):
        kv.row_sparse_pull(3, out=[out, out.copy()], row_ids=[nd.array([1])] * 3)
    with pytest.raises(KVStoreError, match="2 keys need a list of 2 row_ids"):
        kv.row_sparse_pull([3, 3], out=[out, out], row_ids=nd.array([1]))
    with pytest.raises(KVStoreError, match="row_sparse_pull from key 4: the key has not been"):
        kv.row_sparse_pull(4, out=out, row_ids=nd.array([1]))
    np.testing.assert_array_equal(out.asnumpy(), np.zeros(SHAPE))   # nothing written


@pytest.mark.parametrize("name", STORES)
def test_a_store_takes_int_or_str_keys_not_both(name):
    kv = mx.kv.create(name)
    kv.init(3, nd.ones(SHAPE))
    value, out = nd.ones(SHAPE), nd.sparse.zeros("row_sparse", SHAPE)
    for call in (lambda: kv.init("a", value), lambda: kv.push("a", value),
                 lambda: kv.pull("a", out=value),
                 lambda: kv.row_sparse_pull(["a"], out=[out], row_ids=[nd.array([1])])):
        with pytest.raises(MXNetError, match=r"key 'a': this kvstore uses int keys \(such as "
                                             r"3\); a kvstore takes either int keys or str"):
            call()


@pytest.mark.parametrize("name", STORES)
def test_row_sparse_pull_casts_into_the_outs_dtype(name):
    kv = mx.kv.create(name)
    kv.init(1, nd.array(_dense_of_rows([2, 3]), dtype="float16").tostype("row_sparse"))
    out = nd.sparse.zeros("row_sparse", SHAPE, dtype="float32")
    kv.row_sparse_pull(1, out=out, row_ids=nd.array([3]))
    assert out.dtype == np.float32 and out.indices.asnumpy().tolist() == [3]
    np.testing.assert_array_equal(out.asnumpy(), _dense_of_rows([3]))
