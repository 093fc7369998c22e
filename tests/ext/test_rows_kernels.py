"""minigluon_ext's row kernels (rows_sum, rows_take, rows_sgd_update), which a kvstore
server runs on its row_sparse keys: the C kernel and the NumPy fallback against a plain
per-row oracle and against the optimizer's own lazy update, bit for bit; bad ids (unsorted,
duplicated, out of range) get errors that name them, on both paths and in C itself.
"""
import numpy as np
import pytest

import minigluon as mx
from minigluon.base import DTypeError, ShapeError
from minigluon.ndarray.sparse_update import update_rows
from minigluon.optimizer import sgd
import minigluon_ext as ext

UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def same_bits(x, y):
    assert x.dtype == y.dtype and x.shape == y.shape
    if x.dtype.kind == "f":
        x, y = x.view(UINT[x.itemsize]), y.view(UINT[y.itemsize])
    assert np.array_equal(x, y)


def random_parts(rng, sizes, rows, row_shape, dtype):
    ids = [np.unique(rng.integers(0, rows, n)) for n in sizes]
    values = [rng.standard_normal((i.size,) + row_shape).astype(dtype) for i in ids]
    return ids, values


def oracle_sum(ids, values):
    """Each row on its own: part 0's row copied, else 0 + the first row; later rows added."""
    rows = {}
    for p, (part, vals) in enumerate(zip(ids, values)):
        for r, row in zip(part.tolist(), vals):
            if r in rows:
                rows[r] = rows[r] + row
            else:
                rows[r] = row.copy() if p == 0 else vals.dtype.type(0) + row
    keys = sorted(rows)
    shape = (len(keys),) + values[0].shape[1:]
    return np.array(keys, np.int64), np.array([rows[k] for k in keys], values[0].dtype).reshape(shape)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.int32])
@pytest.mark.parametrize("sizes", [(40,), (40, 0, 70), (0, 25), (30, 30, 30, 30, 30)])
def test_rows_sum_matches_the_per_row_oracle(path, dtype, sizes):
    rng = np.random.default_rng(len(sizes))
    ids, values = random_parts(rng, sizes, 60, (3, 2), dtype)
    if dtype != np.int32 and values[0].size:
        values[0].flat[0] = -0.0                       # kept when part 0 starts the row
        values[-1].flat[-1] = np.nan
    want_ids, want = oracle_sum(ids, values)
    got_ids, got = path.rows_sum(ids, values)
    assert np.array_equal(got_ids, want_ids)
    same_bits(got, want)


def test_rows_sum_writes_into_the_scratch_given(path):
    rng = np.random.default_rng(1)
    ids, values = random_parts(rng, (50, 50), 80, (4,), np.float32)
    out_ids, out = np.empty(100, np.int64), np.empty(400, np.float32)
    got_ids, got = path.rows_sum(ids, values, out_ids, out)
    assert np.shares_memory(got_ids, out_ids) and np.shares_memory(got, out)
    want_ids, want = oracle_sum(ids, values)
    assert np.array_equal(got_ids, want_ids)
    same_bits(got, want)


def test_rows_sum_refuses_bad_parts(path):
    good = np.ones((2, 3), np.float32)
    with pytest.raises(ValueError, match=r"rows_sum: ids\[1\] must be sorted and unique, but "
                                         r"ids\[1\]\[1\] = 4 follows 4"):
        path.rows_sum([np.array([1, 2]), np.array([4, 4])], [good, good])
    with pytest.raises(ShapeError, match=r"rows_sum: values\[1\] has shape \(2, 4\), expected "
                                         r"\(2, 3\)"):
        path.rows_sum([np.array([1, 2]), np.array([3, 4])], [good, np.ones((2, 4), np.float32)])
    with pytest.raises(DTypeError, match=r"values\[1\] has dtype float64"):
        path.rows_sum([np.array([1, 2]), np.array([3, 4])], [good, np.ones((2, 3))])
    with pytest.raises(DTypeError, match=r"ids\[0\] must be a 1-D int64"):
        path.rows_sum([np.array([1, 2], np.int32)], [good])
    with pytest.raises(ShapeError, match="out holds 3 items, needs at least 6"):
        path.rows_sum([np.array([1, 2])], [good], None, np.empty(3, np.float32))
    with pytest.raises(ValueError, match="one values array per ids array"):
        path.rows_sum([np.array([1, 2])], [])


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.int64])
def test_rows_take_gathers_any_ids_in_range(path, dtype):
    rng = np.random.default_rng(2)
    table = rng.standard_normal((50, 3, 2)).astype(dtype)
    for ids in (rng.integers(0, 50, 200), np.zeros(0, np.int64), np.array([49, 0, 49])):
        got = path.rows_take(table, ids)
        same_bits(got, table[ids])
    out = np.empty((3, 3, 2), dtype)
    assert path.rows_take(table, np.array([1, 2, 3]), out) is out


def test_rows_take_refuses_ids_out_of_range(path):
    table = np.zeros((10, 4), np.float32)
    with pytest.raises(ValueError, match=r"rows_take: ids\[2\] = 10 is outside the table's 10 "
                                         r"rows; row ids must be in \[0, 10\)"):
        path.rows_take(table, np.array([3, 9, 10, 1]))
    with pytest.raises(ValueError, match=r"ids\[0\] = -1 is outside"):
        path.rows_take(table, np.array([-1]))


def lazy_step_of_the_optimizer(opt, weight, ids, grad, mom, lr, wd, monkeypatch):
    """The lazy update as the optimizer did it before the kernel: rows gathered, stepped
    by SGD._step's NumPy lines, scattered back."""
    from minigluon.ndarray.sparse_storage import RowSparseStorage
    rsp = RowSparseStorage(grad, ids, weight.shape)
    with monkeypatch.context() as m:
        m.setattr(sgd, "_one_pass", lambda *args: False)
        update_rows(np, lambda w, g, s: opt._step(np, 0, w, g, s, lr, wd), weight, rsp, mom,
                    lazy=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("momentum", [0.0, 0.9])
@pytest.mark.parametrize("wd,clip", [(0.0, None), (1e-3, 0.05)])
def test_rows_sgd_update_matches_the_lazy_update(path, dtype, momentum, wd, clip, monkeypatch):
    rng = np.random.default_rng(3)
    weight = rng.standard_normal((300, 5)).astype(dtype)
    mom = rng.standard_normal((300, 5)).astype(dtype) if momentum else None
    ids = np.unique(rng.integers(0, 300, 120))
    grad = rng.standard_normal((ids.size, 5)).astype(dtype)
    grad[0, :3] = [np.nan, np.inf, -np.inf]
    opt = sgd.SGD(learning_rate=0.1, momentum=momentum, wd=wd, clip_gradient=clip)
    opt.rescale_grad = 1 / 8
    want_w, want_m = weight.copy(), None if mom is None else mom.copy()
    lazy_step_of_the_optimizer(opt, want_w, ids, grad, want_m, 0.1, wd, monkeypatch)
    got_w, got_m = weight.copy(), None if mom is None else mom.copy()
    assert path.rows_sgd_update(got_w, ids, grad, got_m, lr=0.1, wd=wd, momentum=momentum,
                                rescale_grad=1 / 8, clip_gradient=clip) is got_w
    same_bits(got_w, want_w)
    if mom is not None:
        same_bits(got_m, want_m)


def test_rows_sgd_update_of_no_rows_changes_nothing(path):
    weight = np.arange(12, dtype=np.float32).reshape(4, 3)
    path.rows_sgd_update(weight, np.zeros(0, np.int64), np.zeros((0, 3), np.float32), lr=1.0)
    same_bits(weight, np.arange(12, dtype=np.float32).reshape(4, 3))


def test_rows_sgd_update_refuses_bad_ids_and_leaves_the_weight(path):
    weight = np.ones((6, 2), np.float32)
    grad = np.ones((2, 2), np.float32)
    for ids, message in [(np.array([3, 3]), r"ids\[1\] = 3 follows 3"),
                         (np.array([4, 1]), r"ids\[1\] = 1 follows 4"),
                         (np.array([2, 6]), r"ids\[1\] = 6 is outside the table's 6 rows"),
                         (np.array([-2, 1]), r"ids\[0\] = -2 is outside")]:
        with pytest.raises(ValueError, match="rows_sgd_update: .*" + message):
            path.rows_sgd_update(weight, ids, grad, lr=1.0)
    with pytest.raises(ShapeError, match=r"grad has shape \(2, 2\), expected \(3, 2\)"):
        path.rows_sgd_update(weight, np.array([0, 1, 2]), grad)
    with pytest.raises(DTypeError, match="mom has dtype float64"):
        path.rows_sgd_update(weight, np.array([0, 1]), grad, np.ones((6, 2)))
    same_bits(weight, np.ones((6, 2), np.float32))


def test_the_c_kernels_check_ids_themselves():
    """Called directly, past the Python checks: an id outside the table is an error, never a
    write or read outside it."""
    if ext.native is None:
        pytest.fail("the C extension is not built: run `python setup.py build_ext --inplace`")
    kernels = ext.native._kernels
    weight, grad = np.ones((4, 2), np.float32), np.ones((2, 2), np.float32)
    with pytest.raises(ValueError, match="rows_sgd: row id 4 at position 1 is outside the "
                                         "table's 4 rows"):
        kernels.rows_sgd(weight, 4, np.array([0, 4]), grad, None, 1.0, 0.0, 0.0, 1.0, 0.0)
    same_bits(weight, np.ones((4, 2), np.float32))
    with pytest.raises(ValueError, match="rows_take: row id -1 at position 0"):
        kernels.rows_take(weight, 4, np.array([-1]), np.empty((1, 2), np.float32))
    with pytest.raises(ValueError, match="rows_add_at: row id 7 at position 1"):
        kernels.rows_add_at(np.zeros((4, 2), np.float32), 4, np.array([0, 7]), grad)
    mean, var = np.zeros((4, 2), np.float32), np.zeros((4, 2), np.float32)
    with pytest.raises(ValueError, match="rows_adam: row id 5 at position 0"):
        kernels.rows_adam(weight, 4, np.array([5]), grad[:1], mean, var, 0.1, 0.9, 0.999,
                          1e-8, 0.0, 1.0, 0.0)
    same_bits(weight, np.ones((4, 2), np.float32))
    with pytest.raises(ValueError, match="rows_sum: out_ids .* need room for 4 rows"):
        kernels.rows_sum([np.array([0, 1]), np.array([1, 2])], [grad, grad], 2,
                         np.empty(1, np.int64), np.empty(8, np.float32))


@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_optimizer_lazy_update_is_the_same_with_and_without_the_kernel(momentum, monkeypatch):
    def train(in_place):
        with monkeypatch.context() as m:
            if not in_place:
                m.setattr(sgd, "_in_place_rows", lambda *args: False)
            opt = mx.optimizer.SGD(learning_rate=0.5, momentum=momentum, wd=1e-2,
                                   clip_gradient=0.3)
            updater = mx.optimizer.get_updater(opt)
            rng = np.random.default_rng(5)
            weight = mx.nd.array(rng.standard_normal((40, 6))).tostype("row_sparse")
            for step in range(3):
                ids = np.unique(rng.integers(0, 40, 15))
                grad = mx.nd.sparse.row_sparse_array(
                    (rng.standard_normal((ids.size, 6)).astype(np.float32), ids), shape=(40, 6))
                updater(0, grad, weight)
            return weight.asnumpy()
    same_bits(train(True), train(False))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("wd,clip", [(0.0, None), (1e-2, 0.05)])
def test_rows_adam_update_matches_the_lazy_update(path, dtype, wd, clip, monkeypatch):
    from minigluon.optimizer import adam
    from minigluon.ndarray.sparse_storage import RowSparseStorage
    rng = np.random.default_rng(7)
    weight, mean = rng.standard_normal((200, 4)).astype(dtype), \
        rng.standard_normal((200, 4)).astype(dtype)
    var = rng.random((200, 4)).astype(dtype)
    ids = np.unique(rng.integers(0, 200, 90))
    grad = rng.standard_normal((ids.size, 4)).astype(dtype)
    grad[0, :2] = [np.nan, np.inf]
    opt = adam.Adam(learning_rate=0.01, wd=wd, clip_gradient=clip)
    opt.rescale_grad = 1 / 4
    opt._index_update_count[0] = 3
    lr = opt._bias_corrected(0, 0.01)
    want = [a.copy() for a in (weight, mean, var)]
    with monkeypatch.context() as m, np.errstate(invalid="ignore"):   # adam.py's lines
        m.setattr(adam, "_in_place_rows", lambda *args: False)
        update_rows(np, lambda w, g, s: opt._step(np, 0, w, g, s, 0.01, wd), want[0],
                    RowSparseStorage(grad, ids, weight.shape), (want[1], want[2]), lazy=True)
    got = [a.copy() for a in (weight, mean, var)]
    path.rows_adam_update(got[0], ids, grad, got[1], got[2], lr, opt.beta1, opt.beta2,
                          opt.epsilon, wd, 1 / 4, clip)
    for a, b in zip(got, want):
        same_bits(a, b)


def test_rows_adam_update_refuses_bad_ids(path):
    weight, mean, var = (np.zeros((5, 2), np.float32) for _ in range(3))
    with pytest.raises(ValueError, match=r"rows_adam_update: ids\[1\] = 5 is outside"):
        path.rows_adam_update(weight, np.array([0, 5]), np.ones((2, 2), np.float32), mean, var,
                              lr=0.1)
    with pytest.raises(ValueError, match="rows_adam_update: var .* shares memory with mean"):
        path.rows_adam_update(weight, np.array([0]), np.ones((1, 2), np.float32), mean, mean,
                              lr=0.1)


def test_adam_lazy_training_is_the_same_with_and_without_the_kernel(monkeypatch):
    from minigluon.optimizer import adam

    def train(in_place):
        with monkeypatch.context() as m:
            if not in_place:
                m.setattr(adam, "_in_place_rows", lambda *args: False)
            updater = mx.optimizer.get_updater(mx.optimizer.Adam(learning_rate=0.1, wd=1e-3))
            rng = np.random.default_rng(8)
            weight = mx.nd.array(rng.standard_normal((30, 3))).tostype("row_sparse")
            for _ in range(3):
                ids = np.unique(rng.integers(0, 30, 12))
                grad = mx.nd.sparse.row_sparse_array(
                    (rng.standard_normal((ids.size, 3)).astype(np.float32), ids), shape=(30, 3))
                updater(0, grad, weight)
            return weight.asnumpy()
    same_bits(train(True), train(False))


# ---- rows_add_at: an Embedding's scatter of gradient rows --------------------------------

@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_rows_add_at_gives_add_at_bits(path, dtype):
    rng = np.random.default_rng(3)
    for rows, width, k in ((10, 4, 25), (1, 3, 5), (50, 1, 0), (7, 256, 40)):
        table = rng.standard_normal((rows, width)).astype(dtype)
        ids = rng.integers(0, rows, k).astype(np.int64)     # repeats: summed in order
        values = rng.standard_normal((k, width)).astype(dtype)
        want = table.copy()
        np.add.at(want, ids, values)
        got = path.rows_add_at(table, ids, values)
        assert got is table
        np.testing.assert_array_equal(got, want)


def test_rows_add_at_refuses_bad_input_alike(path):
    table, values = np.zeros((4, 2), np.float32), np.ones((2, 2), np.float32)
    with pytest.raises(ValueError, match=r"rows_add_at: ids\[1\] = 4 is outside the "
                                         r"table's 4 rows"):
        path.rows_add_at(table, np.array([0, 4]), values)
    with pytest.raises(ShapeError, match=r"values has shape \(2, 2\), expected \(3, 2\)"):
        path.rows_add_at(table, np.array([0, 1, 2]), values)
    with pytest.raises(DTypeError, match="ids must be a 1-D int64"):
        path.rows_add_at(table, np.array([0, 1], np.int32), values)
    with pytest.raises(DTypeError, match="values has dtype float64"):
        path.rows_add_at(table, np.array([0, 1]), values.astype(np.float64))
