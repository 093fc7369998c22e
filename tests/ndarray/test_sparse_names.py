"""mx.nd.sparse loads (MXNet code imports it at the top) and refuses every sparse array
with an error naming the call and the dense alternative."""
import pytest

import minigluon as mx
from minigluon.ndarray import sparse


@pytest.mark.parametrize("call,name", [
    (lambda: sparse.csr_matrix(([1.0], [0], [0, 1]), shape=(1, 2)), "csr_matrix"),
    (lambda: sparse.row_sparse_array(([[1.0]], [0]), shape=(3, 1)), "row_sparse_array"),
    (lambda: sparse.zeros("row_sparse", (3, 2)), "zeros(stype='row_sparse')"),
    (lambda: sparse.empty("csr", (3, 2)), "empty(stype='csr')"),
    (lambda: sparse.array([[1.0]]), "sparse.array"),
    (lambda: sparse.CSRNDArray(), "CSRNDArray"),
])
def test_each_sparse_constructor_says_what_is_missing(call, name):
    with pytest.raises(sparse.SparseStorageError, match="no sparse storage") as info:
        call()
    assert name in str(info.value) and "use dense arrays" in str(info.value)
    assert isinstance(info.value, mx.MXNetError) and isinstance(info.value, NotImplementedError)


def test_dense_arrays_are_not_sparse():
    x = mx.nd.ones((2, 2))
    assert not isinstance(x, (sparse.CSRNDArray, sparse.RowSparseNDArray))
    assert mx.nd.sparse is sparse
