"""mx.test_utils: comparisons and their failure messages, random shapes and arrays,
environment restore, assert_exception and finite-difference gradients."""
import os

import numpy as np
import pytest

import minigluon as mx
from minigluon import nd
from minigluon import test_utils as tu
from minigluon.base import MXNetError


def test_default_context_follows_with_and_set_default():
    assert tu.default_context() == mx.cpu(0)
    with mx.cpu(1):
        assert tu.default_context() == mx.cpu(1)
    tu.set_default_context(mx.cpu(2))
    try:
        assert tu.default_context() == mx.cpu(2)
        assert nd.zeros((1,)).context == mx.cpu(2)
    finally:
        tu.set_default_context(mx.cpu(0))
    assert tu.default_context() == mx.cpu(0)


def test_assert_almost_equal_accepts_mixed_inputs_within_tolerance():
    a = nd.array([1.0, 2.0, 3.0])
    tu.assert_almost_equal(a, np.array([1.0, 2.0, 3.0005], np.float32))   # atol 1e-3
    tu.assert_almost_equal(a, [1, 2, 3])
    tu.assert_almost_equal(nd.ones((2, 3)), 1.0)                             # broadcast
    tu.assert_almost_equal(np.array([np.nan, 1.0]), np.array([np.nan, 1.0]), equal_nan=True)


def test_default_tolerances_depend_on_dtype():
    assert tu.get_tols(np.float16(1), np.float16(1)) == (1e-2, 1e-1)
    assert tu.get_tols(np.float32(1), np.float64(1)) == (1e-4, 1e-3)
    assert tu.get_tols(np.int32(1), np.int64(1)) == (0, 0)
    assert tu.almost_equal(np.array([1.0], np.float16), np.array([1.05], np.float16))
    assert not tu.almost_equal(np.array([1.0]), np.array([1.0 + 1e-4]))    # float64: tight
    assert not tu.almost_equal(np.array([3]), np.array([4]))


def test_failure_message_names_arrays_worst_index_and_values():
    expected = np.zeros((2, 3), np.float32)
    actual = expected.copy()
    actual[1, 2] = 0.5
    actual[0, 1] = 0.01
    with pytest.raises(AssertionError) as err:
        tu.assert_almost_equal(nd.array(actual), expected, names=("net", "ref"))
    msg = str(err.value)
    assert "net and ref are not almost equal (rtol=0.0001, atol=0.001)" in msg
    assert "2 of 6 elements differ" in msg
    assert "worst at index (1, 2): net=0.5, ref=0, |net-ref|=0.5, 500x the tolerance" in msg
    assert "#2 at (0, 1)" in msg


def test_nan_and_shape_mismatches_fail():
    with pytest.raises(AssertionError, match=r"index \(1,\): a=nan"):
        tu.assert_almost_equal(np.array([1.0, np.nan]), np.array([1.0, 1.0]))
    with pytest.raises(AssertionError, match=r"different shapes: x \(2, 3\), y \(3, 2\)"):
        tu.assert_almost_equal(np.zeros((2, 3)), np.zeros((3, 2)), names=("x", "y"))
    with pytest.raises(AssertionError, match="different shapes"):
        tu.assert_almost_equal(np.zeros((2, 3)), np.zeros(3), use_broadcast=False)
    assert not tu.almost_equal(np.zeros((2, 3)), np.zeros((3, 2)))


def test_same_is_exact():
    assert tu.same(nd.array([1, 2]), np.array([1, 2], np.float32))
    assert not tu.same(np.array([1.0, 2.0]), np.array([1.0, 2.0 + 1e-12]))
    assert not tu.same(np.zeros(2), np.zeros(3))


def test_random_shapes_respect_bounds_and_seed():
    mx.random.seed(3)
    shapes = [tu.rand_shape_nd(4, dim=5) for _ in range(20)]
    assert all(len(s) == 4 and all(1 <= n <= 5 for n in s) for s in shapes)
    mx.random.seed(3)
    assert shapes == [tu.rand_shape_nd(4, dim=5) for _ in range(20)]
    d0, d1 = tu.rand_shape_2d(3, 4)
    assert 1 <= d0 <= 3 and 1 <= d1 <= 4
    assert len(tu.rand_shape_3d()) == 3
    zeros = [tu.rand_shape_nd(3, dim=1, allow_zero_size=True) for _ in range(20)]
    assert any(0 in s for s in zeros)


def test_rand_ndarray_dtype_context_density():
    mx.random.seed(0)
    x = tu.rand_ndarray((50, 40), dtype="float16", ctx=mx.cpu(1))
    assert x.shape == (50, 40) and x.dtype == np.float16 and x.context == mx.cpu(1)
    assert abs(float(x.asnumpy().astype(np.float64).std()) - 1) < 0.1
    sparse = tu.rand_ndarray((100, 100), density=0.2).asnumpy()
    assert abs((sparse != 0).mean() - 0.2) < 0.03
    mx.random.seed(0)
    assert tu.same(tu.rand_ndarray((50, 40), dtype="float16"), x)
    with pytest.raises(MXNetError, match="stype must be 'row_sparse' or 'csr'"):
        tu.rand_ndarray((2, 2), stype="coo")


def test_environment_sets_unsets_and_restores(monkeypatch):
    monkeypatch.setenv("MG_TEST_A", "old")
    monkeypatch.delenv("MG_TEST_B", raising=False)
    with tu.environment({"MG_TEST_A": None, "MG_TEST_B": "1"}):
        assert "MG_TEST_A" not in os.environ and os.environ["MG_TEST_B"] == "1"
    assert os.environ["MG_TEST_A"] == "old" and "MG_TEST_B" not in os.environ
    with pytest.raises(RuntimeError):
        with tu.environment("MG_TEST_A", "new"):
            assert os.environ["MG_TEST_A"] == "new"
            raise RuntimeError("boom")
    assert os.environ["MG_TEST_A"] == "old"
    with pytest.raises(TypeError, match="dict or a"):
        with tu.environment("MG_TEST_A"):
            pass


def test_environment_as_decorator(monkeypatch):
    monkeypatch.delenv("MG_TEST_C", raising=False)

    @tu.environment("MG_TEST_C", "7")
    def read():
        return os.environ.get("MG_TEST_C")

    assert read() == "7" and read() == "7"
    assert "MG_TEST_C" not in os.environ


def test_assert_exception():
    tu.assert_exception(int, ValueError, "x")
    tu.assert_exception(lambda: {}["k"], (KeyError, IndexError))
    with pytest.raises(AssertionError, match="int did not raise ValueError"):
        tu.assert_exception(int, ValueError, "3")


def test_numeric_grad_matches_analytic_gradient():
    x, w = np.array([[1.0, -2.0], [0.5, 3.0]]), np.array([2.0, -1.0])
    gx, gw = tu.numeric_grad(lambda a, b: (a * a * b).sum(), [x, nd.array(w)])
    np.testing.assert_allclose(gx, 2 * x * w, rtol=1e-6)
    np.testing.assert_allclose(gw, (x * x).sum(axis=0), rtol=1e-6)


def test_check_numeric_gradient_passes_and_catches_wrong_gradients():
    tu.check_numeric_gradient(lambda a, b: (a * b).sum() + a.exp(),
                              [np.array([0.1, 0.2, 0.3]), np.array([1.0, 2.0, 3.0])])

    class BadSquare(mx.autograd.Function):
        def forward(self, x):
            return x * x

        def backward(self, dy):
            return dy * 3.0

    with pytest.raises(AssertionError, match="autograd grad of input 0"):
        tu.check_numeric_gradient(lambda a: BadSquare()(a), [np.array([1.0, 2.0])])


def test_random_arrays_shapes_dtype_and_single_array():
    np.random.seed(3)
    one = tu.random_arrays((2, 3))
    assert isinstance(one, np.ndarray) and one.shape == (2, 3) and one.dtype == np.float32
    pair = tu.random_arrays((4,), ())
    assert [a.shape for a in pair] == [(4,), ()]
    uniform = tu.random_uniform_arrays((50,), low=2.0, high=3.0, dtype=np.float64)
    assert len(uniform) == 1 and uniform[0].dtype == np.float64
    assert 2.0 <= uniform[0].min() and uniform[0].max() < 3.0


def test_random_sample_is_a_subset_and_checks_k():
    chosen = tu.random_sample(list(range(10)), 4)
    assert len(set(chosen)) == 4 and set(chosen) <= set(range(10))
    with pytest.raises(ValueError, match=r"k must be in \[0, 3\], got 5"):
        tu.random_sample([1, 2, 3], 5)


@pytest.mark.parametrize("axis", [None, 1, -1, (0, 2), [2, 0]])
@pytest.mark.parametrize("keepdims", [False, True])
def test_np_reduce_matches_numpy(axis, keepdims):
    data = np.arange(24.0).reshape(2, 3, 4)
    expected = np.sum(data, axis=tuple(axis) if isinstance(axis, list) else axis,
                      keepdims=keepdims)
    np.testing.assert_array_equal(tu.np_reduce(data, axis, keepdims, np.sum), expected)


def test_effective_dtype_is_the_array_dtype():
    assert tu.effective_dtype(nd.ones((2,), dtype=np.float16)) == np.float16
    assert tu.effective_dtype(np.ones(2)) == np.float64


def test_compare_optimizer_agrees_with_itself_and_catches_a_difference():
    sgd = lambda lr: mx.optimizer.SGD(learning_rate=lr, momentum=0.9)   # noqa: E731
    tu.compare_optimizer(sgd(0.1), sgd(0.1), (3, 4), np.float32)
    tu.compare_optimizer(sgd(0.1), sgd(0.1), [(3,), (2, 2)], np.float32, ntensors=2)
    with pytest.raises(AssertionError):
        tu.compare_optimizer(sgd(0.1), sgd(0.5), (3, 4), np.float32)
    # sparse operands for the optimizer under test, dense copies for the reference
    tu.compare_optimizer(sgd(0.1), sgd(0.1), (3, 4), np.float32, w_stype="row_sparse",
                         g_stype="row_sparse")
    tu.compare_optimizer(sgd(0.1), sgd(0.1), (3, 4), np.float32, w_stype="csr", g_stype="csr")
    with pytest.raises(MXNetError, match="unknown storage type 'coo'"):
        tu.compare_optimizer(sgd(0.1), sgd(0.1), (3,), np.float32, w_stype="coo")


def test_compare_ndarray_tuple_walks_nested_states():
    a = (nd.ones((2,)), (nd.zeros((1,)), None))
    tu.compare_ndarray_tuple(a, (nd.ones((2,)), (nd.zeros((1,)), None)))
    tu.compare_ndarray_tuple(None, a)
    with pytest.raises(AssertionError):
        tu.compare_ndarray_tuple(a, (nd.ones((2,)), (nd.ones((1,)), None)))


def test_discard_stderr_hides_file_descriptor_output(capfd):
    with tu.discard_stderr():
        os.write(2, b"hidden\n")
    os.write(2, b"shown\n")
    assert capfd.readouterr().err == "shown\n"


def test_star_import_gives_mxnet_test_files_their_names():
    names = {}
    exec("from minigluon.test_utils import *", names)
    assert names["mx"] is mx and names["np"] is np
    for helper in ("assert_almost_equal", "default_context", "rand_ndarray", "same",
                   "np_reduce", "random_arrays", "use_np", "environment"):
        assert callable(names[helper]), helper


def _product_plus():
    a, b = mx.sym.var("a"), mx.sym.var("b")
    return a * b + a


def test_check_symbolic_forward_compares_outputs_by_position_and_name():
    x1, x2 = np.random.rand(2, 3), np.random.rand(2, 3)
    out = tu.check_symbolic_forward(_product_plus(), [x1, x2], [x1 * x2 + x1])
    np.testing.assert_allclose(out[0], x1 * x2 + x1, rtol=1e-6)
    with pytest.raises(AssertionError, match="not almost equal"):
        tu.check_symbolic_forward(_product_plus(), {"a": x1, "b": x2}, [x1 * x2])
    with pytest.raises(ValueError, match=r"location has 1 arrays for the symbol's 2"):
        tu.check_symbolic_forward(_product_plus(), [x1], [x1])


@pytest.mark.parametrize("req", ["write", "add", {"a": "write", "b": "null"}])
def test_check_symbolic_backward_follows_grad_req(req):
    x1, x2, head = np.random.rand(2, 3), np.random.rand(2, 3), np.random.rand(2, 3)
    grads = tu.check_symbolic_backward(_product_plus(), [x1, x2], [head],
                                       {"a": head * (x2 + 1), "b": head * x1}, grad_req=req)
    assert set(grads) == {"a", "b"}
    with pytest.raises(AssertionError, match="gradient of a"):
        tu.check_symbolic_backward(_product_plus(), [x1, x2], [head], [head * x2, head * x1],
                                   grad_req=req)


def test_check_symbolic_backward_refuses_sparse_gradients():
    with pytest.raises(MXNetError, match="dense only"):
        tu.check_symbolic_backward(_product_plus(), [np.ones(2), np.ones(2)], [np.ones(2)],
                                   [np.ones(2), np.ones(2)], grad_stypes={"a": "row_sparse"})


def test_closeness_is_decided_chunk_by_chunk_without_missing_any(monkeypatch):
    """Big arrays are compared in chunks (an exact-equality shortcut per chunk): a single
    mismatch in a late chunk, a NaN, or a near value must still be judged as before."""
    from minigluon import test_utils
    monkeypatch.setattr(test_utils, "_CHUNK", 7)
    a = np.linspace(0, 1, 100).reshape(4, 25)
    b = a.copy()
    test_utils.assert_almost_equal(a, b)
    b[3, 24] += 1e-9                       # within tolerance, in the last chunk
    test_utils.assert_almost_equal(a, b, rtol=1e-5, atol=1e-8)
    b[3, 24] += 1.0
    with pytest.raises(AssertionError, match=r"(?s)1 of 100 elements differ.*index \(3, 24\)"):
        test_utils.assert_almost_equal(a, b)
    assert not test_utils.almost_equal(a, b)
    c, d = a.copy(), a.copy()
    c[2, 3] = d[2, 3] = np.nan
    assert not test_utils.almost_equal(c, d)
    assert test_utils.almost_equal(c, d, equal_nan=True)
    test_utils.assert_almost_equal(a[:, :1], a[:1, :1] + np.zeros((4, 1)) + (a[:, :1] - a[0, 0]))


def test_rand_sparse_ndarray_components_and_powerlaw():
    arr, (data, indices) = tu.rand_sparse_ndarray((20, 3), "row_sparse", density=0.5)
    assert arr.stype == "row_sparse" and arr.shape == (20, 3)
    np.testing.assert_array_equal(arr.asnumpy()[indices], data)
    arr, (data, indices, indptr) = tu.rand_sparse_ndarray((6, 7), "csr", density=0.4,
                                                          data_init=2.0)
    assert arr.stype == "csr" and (data == 2).all() and indptr[-1] == len(indices) == len(data)
    arr, _ = tu.rand_sparse_ndarray((6, 40), "csr", density=0.1, distribution="powerlaw")
    per_row = np.diff(arr.indptr.asnumpy())
    assert per_row.tolist() == [1, 2, 4, 8, 9, 0] and arr.data.shape == (24,)
    assert tu.rand_ndarray((4, 4), "csr", density=1.0).stype == "csr"
    tu.assert_almost_equal(arr, arr.asnumpy())
