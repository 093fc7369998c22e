"""The sparse kernels of ops_sparse.py against the dense oracle: each result has the storage
type MXNet gives, the values NumPy gives on the dense arrays, and gradients flow to dense
operands."""
import numpy as np
import pytest

import minigluon as mx
from minigluon.ndarray import sparse

RNG = np.random.RandomState(7)


def dense(shape, density=0.4, seed=0):
    rng = np.random.RandomState(seed)
    values = rng.uniform(-2, 2, shape).astype(np.float32)
    return values * (rng.uniform(0, 1, shape) < density)


def as_stype(values, stype):
    return mx.nd.array(values).tostype(stype)


@pytest.mark.parametrize("stype", ["row_sparse", "csr"])
@pytest.mark.parametrize("name, oracle", [
    ("negative", np.negative), ("abs", np.abs), ("sign", np.sign), ("square", np.square),
    ("sqrt", lambda x: np.sqrt(np.abs(x))), ("relu", lambda x: np.maximum(x, 0)),
    ("tanh", np.tanh), ("floor", np.floor), ("expm1", np.expm1)])
def test_zero_preserving_unary_ops_keep_storage_and_values(stype, name, oracle):
    values = dense((6, 5))
    if name == "sqrt":
        values = np.abs(values)
    x = as_stype(values, stype)
    y = getattr(mx.nd, name)(x)
    assert y.stype == stype
    y.check_format()
    np.testing.assert_array_equal(y.asnumpy(), getattr(mx.nd, name)(mx.nd.array(values)).asnumpy())
    np.testing.assert_allclose(y.asnumpy(), oracle(values), rtol=1e-6)


@pytest.mark.parametrize("stype", ["row_sparse", "csr"])
def test_scalar_ops_keep_sparsity_only_when_zero_stays_zero(stype):
    values = dense((6, 5))
    x = as_stype(values, stype)
    with np.errstate(divide="ignore", invalid="ignore"):
        cases = [(x * 2, values * 2, True), (2 * x, values * 2, True),
                 (x / 4, values / 4, True), (x ** 2, values ** 2, True),
                 (-x, -values, True), (x + 1, values + 1, False),
                 (x - 1, values - 1, False), (x / 0, values / 0, False),
                 (mx.nd.clip(x, -1, 1), np.clip(values, -1, 1), True),
                 (mx.nd.clip(x, 0.5, 1), np.clip(values, 0.5, 1), False)]
    for result, want, kept in cases:
        assert result.stype == (stype if kept else "default")
        np.testing.assert_array_equal(result.asnumpy(), want)


@pytest.mark.parametrize("stype", ["row_sparse", "csr"])
@pytest.mark.parametrize("name, oracle", [("elemwise_add", np.add), ("elemwise_sub", np.subtract),
                                          ("elemwise_mul", np.multiply)])
def test_pairs_of_one_stype_stay_sparse(stype, name, oracle):
    a, b = dense((7, 4), seed=1), dense((7, 4), seed=2)
    out = getattr(mx.nd, name)(as_stype(a, stype), as_stype(b, stype))
    assert out.stype == stype
    out.check_format()
    np.testing.assert_array_equal(out.asnumpy(), oracle(a, b))
    mixed = getattr(mx.nd.sparse, name)(as_stype(a, stype), mx.nd.array(b))
    assert mixed.stype == "default"
    np.testing.assert_array_equal(mixed.asnumpy(), oracle(a, b))


def test_row_sparse_pairs_with_empty_and_disjoint_rows():
    a = sparse.row_sparse_array(([[1.0, 2.0]], [0]), shape=(4, 2))
    b = sparse.row_sparse_array(([[3.0, 4.0]], [3]), shape=(4, 2))
    empty = sparse.zeros("row_sparse", (4, 2))
    assert (a + b).indices.asnumpy().tolist() == [0, 3]
    assert (a * b).indices.asnumpy().tolist() == []
    np.testing.assert_array_equal((a - empty).asnumpy(), a.asnumpy())
    column = sparse.row_sparse_array(([[2.0]], [3]), shape=(4, 1))
    broadcast = a * column               # shapes differ: the dense op broadcasts
    assert broadcast.stype == "default"
    np.testing.assert_array_equal(broadcast.asnumpy(), a.asnumpy() * column.asnumpy())


def test_add_n_of_row_sparse():
    parts = [dense((8, 3), seed=s) for s in range(4)]
    out = mx.nd.add_n(*[as_stype(p, "row_sparse") for p in parts])
    assert out.stype == "row_sparse"
    np.testing.assert_allclose(out.asnumpy(), sum(parts), rtol=1e-6)
    mixed = mx.nd.add_n(as_stype(parts[0], "row_sparse"), mx.nd.array(parts[1]))
    assert mixed.stype == "default"


def test_retain_keeps_the_named_rows():
    values = np.arange(12, dtype=np.float32).reshape(6, 2)
    x = as_stype(values, "row_sparse")
    for out in (mx.nd.sparse.retain(x, mx.nd.array([1, 4, 5])), x.retain(mx.nd.array([1, 4, 5]))):
        assert out.stype == "row_sparse" and out.indices.asnumpy().tolist() == [1, 4, 5]
        want = np.zeros_like(values)
        want[[1, 4, 5]] = values[[1, 4, 5]]
        np.testing.assert_array_equal(out.asnumpy(), want)
    with pytest.raises(mx.MXNetError, match="data must be a row_sparse array"):
        mx.nd.sparse.retain(mx.nd.array(values), mx.nd.array([1]))


@pytest.mark.parametrize("transpose_a", [False, True])
def test_dot_csr_dense(transpose_a):
    a = dense((6, 9), seed=3)
    rhs = RNG.uniform(-1, 1, (6 if transpose_a else 9, 4)).astype(np.float32)
    out = mx.nd.sparse.dot(as_stype(a, "csr"), mx.nd.array(rhs), transpose_a=transpose_a)
    assert out.stype == ("row_sparse" if transpose_a else "default")
    want = (a.T if transpose_a else a) @ rhs
    np.testing.assert_allclose(out.asnumpy(), want, rtol=1e-5, atol=1e-6)


def test_dot_csr_vector_and_dense_csr():
    a = dense((6, 9), seed=4)
    v = RNG.uniform(-1, 1, 9).astype(np.float32)
    np.testing.assert_allclose(mx.nd.dot(as_stype(a, "csr"), mx.nd.array(v)).asnumpy(), a @ v,
                               rtol=1e-5, atol=1e-6)
    lhs = RNG.uniform(-1, 1, (3, 6)).astype(np.float32)
    out = mx.nd.dot(mx.nd.array(lhs), as_stype(a, "csr"))
    assert out.stype == "default"
    np.testing.assert_allclose(out.asnumpy(), lhs @ a, rtol=1e-5, atol=1e-6)
    lhs_t = RNG.uniform(-1, 1, (3, 9)).astype(np.float32)
    out = mx.nd.dot(mx.nd.array(lhs_t), as_stype(a, "csr"), transpose_b=True)
    np.testing.assert_allclose(out.asnumpy(), lhs_t @ a.T, rtol=1e-5, atol=1e-6)
    with pytest.raises(mx.MXNetError, match="not aligned"):
        mx.nd.dot(as_stype(a, "csr"), mx.nd.ones((4, 2)))


@pytest.mark.parametrize("rhs_stype, grad_stype", [("default", "row_sparse"),
                                                   ("row_sparse", None), ("default", None)])
def test_dot_gradient_of_the_dense_operand(rhs_stype, grad_stype):
    a = dense((4, 8), seed=5)
    rhs = mx.nd.array(RNG.uniform(-1, 1, (8, 3)).astype(np.float32)).tostype(rhs_stype)
    rhs.attach_grad(stype=grad_stype)
    head = RNG.uniform(-1, 1, (4, 3)).astype(np.float32)
    with mx.autograd.record():
        y = mx.nd.dot(as_stype(a, "csr"), rhs)
    y.backward(mx.nd.array(head))
    assert rhs.grad.stype == (grad_stype or rhs_stype)
    np.testing.assert_allclose(rhs.grad.asnumpy(), a.T @ head, rtol=1e-5, atol=1e-6)


def test_dot_gradient_through_transpose_a_and_dense_lhs():
    a = dense((5, 7), seed=6)
    rhs = mx.nd.array(RNG.uniform(-1, 1, (5, 2)).astype(np.float32))
    rhs.attach_grad()
    with mx.autograd.record():
        y = mx.nd.dot(as_stype(a, "csr"), rhs, transpose_a=True)
    y.backward()
    np.testing.assert_allclose(rhs.grad.asnumpy(), a @ np.ones((7, 2)), rtol=1e-5, atol=1e-6)
    lhs = mx.nd.array(RNG.uniform(-1, 1, (3, 5)).astype(np.float32))
    lhs.attach_grad()
    with mx.autograd.record():
        y = mx.nd.dot(lhs, as_stype(a, "csr"))
    y.backward()
    np.testing.assert_allclose(lhs.grad.asnumpy(), np.ones((3, 7)) @ a.T, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("stype", ["row_sparse", "csr"])
def test_sum_and_norm_of_all_elements(stype):
    values = dense((6, 5), seed=8)
    x = as_stype(values, stype)
    np.testing.assert_allclose(mx.nd.sum(x).asnumpy(), [values.sum()], rtol=1e-5)
    assert mx.nd.sum(x, keepdims=True).shape == (1, 1)
    np.testing.assert_allclose(mx.nd.norm(x).asnumpy(), [np.linalg.norm(values)], rtol=1e-5)
    np.testing.assert_allclose(x.norm(ord=1).asnumpy(), [np.abs(values).sum()], rtol=1e-5)
    np.testing.assert_allclose(mx.nd.sum(x, axis=0).asnumpy(), values.sum(0), rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(mx.nd.sum(x, axis=1, keepdims=True).asnumpy(),
                               values.sum(1, keepdims=True), rtol=1e-5, atol=1e-6)


def test_sum_gradient_of_a_sparse_variable():
    x = as_stype(dense((4, 3), seed=9), "row_sparse")
    x.attach_grad()
    with mx.autograd.record():
        y = mx.nd.sum(x * 3)
    y.backward()
    assert x.grad.stype == "row_sparse"
    np.testing.assert_array_equal(x.grad.asnumpy(), np.full((4, 3), 3, np.float32))


def test_csr_row_slices():
    values = dense((7, 5), seed=10)
    x = as_stype(values, "csr")
    for got, want in [(x[2:5], values[2:5]), (x[3], values[3:4]), (x[5:2], values[5:2]),
                      (mx.nd.slice(x, begin=(1,), end=(6,)), values[1:6])]:
        assert got.stype == "csr"
        got.check_format()
        np.testing.assert_array_equal(got.asnumpy(), want)
    cols = mx.nd.slice(x, begin=(1, 1), end=(3, 4))
    assert cols.stype == "default"
    np.testing.assert_array_equal(cols.asnumpy(), values[1:3, 1:4])


@pytest.mark.parametrize("name, oracle", [("equal", np.equal), ("not_equal", np.not_equal),
                                          ("greater", np.greater), ("lesser_equal", np.less_equal)])
def test_comparisons_with_a_scalar_stay_sparse_when_zero_compares_false(name, oracle):
    values = dense((5, 4), seed=13)
    x = as_stype(values, "csr")
    for scalar in (1.0, 0.0, -1.0):
        got = getattr(mx.nd, name)(x, scalar)
        want = oracle(values, scalar).astype(np.float32)
        assert got.stype == ("csr" if not oracle(0.0, scalar) else "default")
        np.testing.assert_array_equal(got.asnumpy(), want)


@pytest.mark.parametrize("mode", ["clip", "wrap"])
def test_take_rows_of_csr(mode):
    values = dense((5, 6), seed=14)
    ids = np.array([4, 0, -2, 7, 2])
    got = mx.nd.take(as_stype(values, "csr"), mx.nd.array(ids), mode=mode)
    assert got.stype == "csr" and got.indptr.asnumpy()[0] == 0
    got.check_format()
    np.testing.assert_array_equal(got.asnumpy(), np.take(values, ids, axis=0, mode=mode))


def test_getnnz_counts_stored_values():
    values = dense((5, 6), seed=15)
    x = as_stype(values, "csr")
    assert mx.nd.contrib.getnnz(x).asnumpy().tolist() == [int((values != 0).sum())]
    np.testing.assert_array_equal(mx.nd.contrib.getnnz(x, axis=0).asnumpy(), (values != 0).sum(0))
    np.testing.assert_array_equal(mx.nd.contrib.getnnz(x, axis=1).asnumpy(), (values != 0).sum(1))
    with pytest.raises(mx.MXNetError, match="must be a csr matrix"):
        mx.nd.contrib.getnnz(mx.nd.array(values))


def test_zeros_like_keeps_stype_and_sparse_namespace_has_the_ops():
    x = as_stype(dense((3, 3)), "csr")
    for z in (mx.nd.zeros_like(x), x.zeros_like()):
        assert z.stype == "csr" and not z.asnumpy().any()
    assert x.ones_like().stype == "default"
    assert mx.nd.sparse.zeros is sparse.zeros and mx.nd.sparse.dot.__name__ == "dot"


def test_inplace_ops_keep_the_storage_type():
    a, b = dense((5, 3), seed=11), dense((5, 3), seed=12)
    x = as_stype(a, "row_sparse")
    x += as_stype(b, "row_sparse")
    x *= 2
    assert x.stype == "row_sparse"
    np.testing.assert_array_equal(x.asnumpy(), (a + b) * 2)
    x += 1     # the dense result goes back into row_sparse storage
    assert x.stype == "row_sparse"
    np.testing.assert_array_equal(x.asnumpy(), (a + b) * 2 + 1)


def test_fully_connected_falls_back_with_sparse_inputs_and_a_column_bias():
    data = dense((5, 10), seed=16)
    weight = RNG.uniform(-1, 1, (8, 10)).astype(np.float32)
    bias = RNG.uniform(-1, 1, (8, 1)).astype(np.float32)
    out = mx.nd.FullyConnected(as_stype(data, "csr"), as_stype(weight, "row_sparse"),
                               as_stype(bias, "row_sparse"), num_hidden=8)
    assert out.stype == "default"
    np.testing.assert_allclose(out.asnumpy(), data @ weight.T + bias.T, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("sparse_grad", [True, False])
def test_embedding_reads_a_row_sparse_table_without_densifying_it(sparse_grad, caplog):
    """Lookups in a row_sparse table equal those in its dense twin (rows it does not store
    read as zeros), with no storage fallback; the table's gradient is the dense one."""
    rng = np.random.default_rng(3)
    table = rng.standard_normal((12, 3)).astype(np.float32)
    table[[0, 5, 6, 11]] = 0                    # rows the row_sparse table does not store
    stored = [1, 2, 3, 4, 7, 8, 9, 10]
    x = mx.nd.array([[1, 4, 5], [7, 7, 11]])
    results = []
    for weight in (mx.nd.sparse.row_sparse_array((table[stored], stored), shape=(12, 3)),
                   mx.nd.array(table)):
        weight.attach_grad(stype="row_sparse" if sparse_grad else "default")
        with caplog.at_level("WARNING", logger="minigluon.ndarray"):
            with mx.autograd.record():
                out = mx.nd.Embedding(x, weight, input_dim=12, output_dim=3,
                                      sparse_grad=sparse_grad)
                loss = (out * out).sum()
        loss.backward()
        results.append((out.asnumpy(), weight.grad.asnumpy(), weight.grad.stype))
    assert "storage fallback" not in caplog.text
    np.testing.assert_array_equal(results[0][0], table[x.asnumpy().astype(int)])
    np.testing.assert_array_equal(results[0][0], results[1][0])
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-6)
    assert results[0][2] == ("row_sparse" if sparse_grad else "default")
