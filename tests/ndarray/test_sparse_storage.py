"""Sparse storage: the classes, creation, conversion both ways, check_format, the storage
fallback of operators without a sparse kernel, and autograd through it. The dense NumPy
array is the oracle throughout."""
import logging
import pickle

import numpy as np
import pytest

import minigluon as mx
from minigluon.ndarray import registry, sparse
from minigluon.ndarray.sparse import CSRNDArray, RowSparseNDArray, SparseFormatError

DENSE = np.array([[0, 1, 0, 0], [0, 0, 0, 0], [2, 0, 3, 0], [0, 0, 0, 4]], np.float32)
CLASSES = {"row_sparse": RowSparseNDArray, "csr": CSRNDArray}


@pytest.mark.parametrize("stype", ["row_sparse", "csr"])
def test_tostype_both_ways_and_components(stype):
    x = mx.nd.array(DENSE).tostype(stype)
    assert type(x) is CLASSES[stype] and x.stype == stype and isinstance(x, mx.nd.NDArray)
    assert x.shape == (4, 4) and x.dtype == np.float32 and x.size == 16 and x.ndim == 2
    assert x.context == mx.cpu()
    np.testing.assert_array_equal(x.asnumpy(), DENSE)
    back = x.tostype("default")
    assert type(back) is mx.nd.NDArray and back.stype == "default"
    np.testing.assert_array_equal(back.asnumpy(), DENSE)
    np.testing.assert_array_equal(mx.nd.cast_storage(x, stype="default").asnumpy(), DENSE)
    other = "csr" if stype == "row_sparse" else "row_sparse"
    np.testing.assert_array_equal(x.tostype(other).asnumpy(), DENSE)
    assert x.indices.dtype == np.int64


def test_row_sparse_components():
    x = mx.nd.array(DENSE).tostype("row_sparse")
    assert x.indices.asnumpy().tolist() == [0, 2, 3]
    np.testing.assert_array_equal(x.data.asnumpy(), DENSE[[0, 2, 3]])


def test_csr_components():
    x = mx.nd.array(DENSE).tostype("csr")
    assert x.data.asnumpy().tolist() == [1, 2, 3, 4]
    assert x.indices.asnumpy().tolist() == [1, 0, 2, 3]
    assert x.indptr.asnumpy().tolist() == [0, 1, 1, 3, 4]


def test_row_sparse_array_from_parts_infers_shape_and_dtype():
    x = sparse.row_sparse_array(([[1.0, 2.0]], [3]), shape=(5, 2))
    assert x.shape == (5, 2) and x.dtype == np.float32
    np.testing.assert_array_equal(x.asnumpy()[3], [1, 2])
    y = sparse.row_sparse_array((np.ones((2, 3), np.float64), [0, 4]))
    assert y.shape == (5, 3) and y.dtype == np.float64
    z = sparse.row_sparse_array((4, 2), dtype="float16")
    assert z.stype == "row_sparse" and z.dtype == np.float16 and not z.asnumpy().any()


def test_csr_matrix_every_way():
    want = np.array([[0, 0, 0], [0, 0, 5]], np.float32)
    np.testing.assert_array_equal(
        sparse.csr_matrix(([5.0], [2], [0, 0, 1]), shape=(2, 3)).asnumpy(), want)
    np.testing.assert_array_equal(sparse.csr_matrix(([5.0], [2], [0, 0, 1])).asnumpy(), want)
    coo = sparse.csr_matrix(([2.0, 1.0, 3.0], ([1, 0, 1], [2, 0, 2])), shape=(2, 3))
    np.testing.assert_array_equal(coo.asnumpy(), [[1, 0, 0], [0, 0, 5]])   # duplicates sum
    np.testing.assert_array_equal(sparse.csr_matrix(want).asnumpy(), want)
    np.testing.assert_array_equal(sparse.csr_matrix(mx.nd.array(want)).asnumpy(), want)
    assert sparse.csr_matrix((3, 4)).asnumpy().shape == (3, 4)


def test_csr_from_and_to_scipy():
    scipy_sparse = pytest.importorskip("scipy.sparse")
    m = scipy_sparse.random(6, 5, density=0.3, format="csr", dtype=np.float32,
                            random_state=0)
    x = sparse.csr_matrix(m)
    np.testing.assert_array_equal(x.asnumpy(), m.toarray())
    np.testing.assert_array_equal(sparse.array(m).asnumpy(), m.toarray())
    assert mx.nd.array(m).stype == "csr"
    np.testing.assert_array_equal(x.asscipy().toarray(), m.toarray())


@pytest.mark.parametrize("stype", ["row_sparse", "csr"])
def test_zeros_empty_array_and_nd_zeros(stype):
    for x in (sparse.zeros(stype, (3, 4)), sparse.empty(stype, (3, 4)),
              mx.nd.zeros((3, 4), stype=stype), mx.nd.empty((3, 4), stype=stype)):
        assert x.stype == stype and x.shape == (3, 4) and not x.asnumpy().any()
        assert x.data.shape[0] == 0
    src = mx.nd.array(DENSE).tostype(stype)
    for copy in (sparse.array(src), mx.nd.array(src), src.copy()):
        assert copy.stype == stype and copy is not src
        np.testing.assert_array_equal(copy.asnumpy(), DENSE)
    assert sparse.array(src, dtype="float64").dtype == np.float64


@pytest.mark.parametrize("stype", ["row_sparse", "csr"])
def test_copy_copyto_context_astype(stype):
    x = mx.nd.array(DENSE).tostype(stype)
    moved = x.as_in_context(mx.cpu(1))
    assert moved.context == mx.cpu(1) and moved.stype == stype
    np.testing.assert_array_equal(moved.asnumpy(), DENSE)
    assert x.as_in_context(mx.cpu()) is x
    dense_out = mx.nd.zeros((4, 4))
    x.copyto(dense_out)
    np.testing.assert_array_equal(dense_out.asnumpy(), DENSE)
    other = "csr" if stype == "row_sparse" else "row_sparse"
    sparse_out = sparse.zeros(other, (4, 4))
    mx.nd.array(DENSE).copyto(sparse_out)
    assert sparse_out.stype == other
    np.testing.assert_array_equal(sparse_out.asnumpy(), DENSE)
    y = x.astype("float64")
    assert y.dtype == np.float64 and y.stype == stype and x.astype("float32", copy=False) is x
    assert repr(x) == f"\n<{type(x).__name__} 4x4 @cpu(0)>"


@pytest.mark.parametrize("stype", ["row_sparse", "csr"])
def test_setitem_whole_and_pickle(stype):
    x = sparse.zeros(stype, (4, 4))
    x[:] = mx.nd.array(DENSE)
    assert x.stype == stype
    np.testing.assert_array_equal(x.asnumpy(), DENSE)
    x[:] = 0
    assert not x.asnumpy().any()
    with pytest.raises(mx.MXNetError, match="only x\\[:\\] = value"):
        x[1] = 2
    y = pickle.loads(pickle.dumps(mx.nd.array(DENSE).tostype(stype)))
    assert y.stype == stype
    np.testing.assert_array_equal(y.asnumpy(), DENSE)


@pytest.mark.parametrize("make, message", [
    (lambda: sparse.row_sparse_array(([[1.0], [2.0]], [2, 1]), shape=(4, 1)), "sorted and unique"),
    (lambda: sparse.row_sparse_array(([[1.0], [2.0]], [1, 1]), shape=(4, 1)), "sorted and unique"),
    (lambda: sparse.row_sparse_array(([[1.0]], [4]), shape=(4, 1)), "out of range"),
    (lambda: sparse.row_sparse_array(([[1.0]], [-1]), shape=(4, 1)), "out of range"),
    (lambda: sparse.csr_matrix(([1.0, 2.0], [1, 0], [0, 2]), shape=(1, 3)), "within each row"),
    (lambda: sparse.csr_matrix(([1.0], [3], [0, 1]), shape=(1, 3)), "out of range"),
    (lambda: sparse.csr_matrix(([1.0], [0], [0, 2]), shape=(1, 3)), "indptr must start at 0"),
    (lambda: sparse.csr_matrix(([7.0, 8.0, 9.0], [0, 2, 1], [0, 5, 2, 3]), shape=(3, 4)),
     "never decrease"),
])
def test_check_format_names_bad_ids(make, message):
    x = make()        # as in MXNet, constructors check shapes only
    x.check_format(full_check=False)
    with pytest.raises(SparseFormatError, match=message):
        x.check_format()


@pytest.mark.parametrize("make, message", [
    (lambda: sparse.row_sparse_array(([[1.0]], [0, 1]), shape=(4, 1)), "one row id per row"),
    (lambda: sparse.csr_matrix(([1.0], [0], [0, 1]), shape=(2, 3)), "needs 3 entries"),
    (lambda: sparse.row_sparse_array(([[1.0]], []), shape=None), "cannot infer the shape"),
    (lambda: sparse.row_sparse_array((2, 2), shape=(3, 2)), "does not match"),
    (lambda: sparse.csr_matrix((2, 2), shape=(3, 2)), "does not match"),
    (lambda: sparse.csr_matrix(mx.nd.ones((2, 2)), shape=(3, 2)), "does not match"),
])
def test_constructors_refuse_components_of_the_wrong_shape(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_check_format_finds_a_corrupted_array():
    x = mx.nd.array(DENSE).tostype("csr")
    x.check_format()
    x._data.indices[:] = x._data.indices[::-1].copy()
    with pytest.raises(SparseFormatError, match="within each row"):
        x.check_format(full_check=True)
    x.check_format(full_check=False)     # shapes only


def test_bad_stype_and_shapes_are_named():
    with pytest.raises(ValueError, match="unknown storage type 'coo'"):
        mx.nd.ones((2, 2)).tostype("coo")
    with pytest.raises(ValueError, match="unknown storage type 'dense'"):
        sparse.zeros("dense", (2, 2))
    with pytest.raises(mx.MXNetError, match="csr storage is for 2-D arrays"):
        mx.nd.ones((2, 2, 2)).tostype("csr")


@pytest.fixture
def fresh_fallback_log(monkeypatch):
    monkeypatch.setattr(registry, "_fallbacks_logged", set())


@pytest.mark.parametrize("stype", ["row_sparse", "csr"])
def test_fallback_runs_dense_and_logs_once(stype, caplog, fresh_fallback_log, monkeypatch):
    monkeypatch.delenv("MXNET_STORAGE_FALLBACK_LOG_VERBOSE", raising=False)
    x = mx.nd.array(DENSE).tostype(stype)
    with caplog.at_level(logging.WARNING, logger="minigluon.ndarray"):
        y = mx.nd.exp(x)
        mx.nd.exp(x)
    assert type(y) is mx.nd.NDArray and y.stype == "default"
    np.testing.assert_allclose(y.asnumpy(), np.exp(DENSE), rtol=1e-6)
    logged = [r for r in caplog.records if "storage fallback" in r.getMessage()]
    assert len(logged) == 1 and "operator exp" in logged[0].getMessage()


def test_fallback_log_is_silenced_by_the_environment(caplog, fresh_fallback_log, monkeypatch):
    monkeypatch.setenv("MXNET_STORAGE_FALLBACK_LOG_VERBOSE", "0")
    with caplog.at_level(logging.WARNING, logger="minigluon.ndarray"):
        mx.nd.exp(mx.nd.array(DENSE).tostype("csr"))
    assert not [r for r in caplog.records if "storage fallback" in r.getMessage()]


def test_fallback_with_a_sparse_out_converts_into_it():
    out = sparse.zeros("row_sparse", (4, 4))
    mx.nd.exp(mx.nd.array(DENSE), out=out)
    assert out.stype == "row_sparse"
    np.testing.assert_allclose(out.asnumpy(), np.exp(DENSE), rtol=1e-6)


@pytest.mark.parametrize("stype", ["row_sparse", "csr"])
@pytest.mark.parametrize("grad_stype", [None, "default", "row_sparse", "csr"])
def test_gradient_through_the_fallback_takes_the_buffer_stype(stype, grad_stype):
    x = mx.nd.array(DENSE).tostype(stype)
    x.attach_grad(stype=grad_stype)
    assert x.grad.stype == (grad_stype or stype)
    with mx.autograd.record():
        y = mx.nd.exp(x) * 2
    y.backward()
    assert x.grad.stype == (grad_stype or stype)
    np.testing.assert_allclose(x.grad.asnumpy(), 2 * np.exp(DENSE), rtol=1e-6)


def test_gradient_add_req_accumulates_in_sparse_buffer():
    x = mx.nd.array(DENSE).tostype("row_sparse")
    x.attach_grad(grad_req="add")
    for _ in range(2):
        with mx.autograd.record():
            y = mx.nd.sin(x)
        y.backward()
    assert x.grad.stype == "row_sparse"
    np.testing.assert_allclose(x.grad.asnumpy(), 2 * np.cos(DENSE), rtol=1e-6)


def test_sparse_head_gradient_and_autograd_grad():
    x = mx.nd.array(DENSE).tostype("csr")
    x.attach_grad()
    with mx.autograd.record():
        y = x * 3
    assert y.stype == "csr"
    y.backward(out_grad=mx.nd.ones_like(y.tostype("default")).tostype("csr"))
    np.testing.assert_array_equal(x.grad.asnumpy(), np.full((4, 4), 3, np.float32))
    with mx.autograd.record():
        y = mx.nd.exp(x)
    g, = mx.autograd.grad(y, [x])
    assert g.stype == "default"
    np.testing.assert_allclose(g.asnumpy(), np.exp(DENSE), rtol=1e-6)


def test_detach_keeps_stype_and_dense_results_stay_dense_class():
    x = mx.nd.array(DENSE).tostype("row_sparse")
    assert x.detach().stype == "row_sparse"
    assert type(mx.nd.array(DENSE) + x) is mx.nd.NDArray
    dense = mx.nd.zeros((4, 4))
    dense[:] = x
    np.testing.assert_array_equal(dense.asnumpy(), DENSE)


@pytest.mark.parametrize("stype", ["row_sparse", "csr"])
def test_sparse_arrays_move_to_a_simulated_gpu_and_compute_there(stype, monkeypatch):
    monkeypatch.setenv("MINIGLUON_SIMULATED_GPUS", "1")
    x = mx.nd.array(DENSE).tostype(stype).as_in_context(mx.gpu(0))
    assert x.context == mx.gpu(0) and x.stype == stype
    y = x * 2
    assert y.context == mx.gpu(0) and y.stype == stype
    np.testing.assert_array_equal(y.copyto(mx.cpu()).asnumpy(), DENSE * 2)
