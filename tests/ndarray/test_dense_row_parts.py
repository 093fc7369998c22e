"""A dense layer's rows in parts over the compute threads (ndarray/row_product.py): the
parts give the whole product (with and without bias, odd splits), FullyConnected gives the
same outputs and gradients with the split on and off, and the language model's decoder is
split where two threads are free, small layers never."""
import numpy as np
import pytest

from minigluon import autograd, config, nd, threads
from minigluon.ndarray import ops_nn, row_product


@pytest.fixture
def two_compute_threads(monkeypatch):
    if config.usable_cores() < 2:
        pytest.skip("needs 2 usable cores")
    monkeypatch.setenv("MINIGLUON_ADAPTIVE_THREADS", "0")
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    threads.look_again()
    yield
    monkeypatch.undo()
    threads.look_again()


@pytest.fixture
def small_parts(monkeypatch, two_compute_threads):
    """Parts of 2 rows and any size of product: small shapes split as the big ones do."""
    monkeypatch.setattr(row_product, "MIN_ROWS", 2)
    monkeypatch.setattr(row_product, "MIN_WORK", 0)


@pytest.mark.parametrize("dtype,tol", [(np.float32, 1e-5), (np.float64, 1e-13)])
@pytest.mark.parametrize("rows,width,units", [(4, 3, 5), (7, 6, 2), (33, 8, 17), (5, 1, 1)])
def test_parts_give_the_whole_product(small_parts, rows, width, units, dtype, tol):
    rng = np.random.default_rng(rows * width)
    x, w = (rng.standard_normal(s).astype(dtype) for s in ((rows, width), (units, width)))
    b = rng.standard_normal(units).astype(dtype)
    assert row_product.parts_for(x, w) == 2
    np.testing.assert_allclose(row_product.dense_rows(x, w, b), x @ w.T + b, rtol=tol, atol=tol)
    np.testing.assert_allclose(row_product.dense_rows(x, w), x @ w.T, rtol=tol, atol=tol)
    assert row_product.dense_rows(x, w, b).dtype == dtype


@pytest.mark.parametrize("flatten", [True, False])
def test_fully_connected_is_the_same_split_or_not(small_parts, flatten, monkeypatch):
    rng = np.random.default_rng(1)
    data = rng.standard_normal((6, 5, 4))
    width = 20 if flatten else 4
    arrays = [data, rng.standard_normal((9, width)), rng.standard_normal(9)]
    head = rng.standard_normal((6, 9) if flatten else (6, 5, 9))

    def run(split):
        monkeypatch.setattr(ops_nn, "ROW_PARTS", split)
        xs = [nd.array(a, dtype="float64") for a in arrays]
        for a in xs:
            a.attach_grad()
        with autograd.record():
            y = nd.FullyConnected(*xs, num_hidden=9, flatten=flatten)
        y.backward(nd.array(head, dtype="float64"))
        return [y.asnumpy()] + [a.grad.asnumpy() for a in xs]

    for got, want in zip(run(True), run(False)):
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13)


def test_the_decoder_splits_and_small_layers_do_not(two_compute_threads):
    decoder = (np.zeros((1120, 256), np.float32), np.zeros((10000, 256), np.float32))
    assert row_product.parts_for(*decoder) == 2
    assert row_product.parts_for(np.zeros((64, 800), np.float32),
                                 np.zeros((500, 800), np.float32)) == 1     # LeNet's
    assert row_product.parts_for(decoder[0].astype(np.float16),
                                 decoder[1].astype(np.float16)) == 1


def test_one_free_thread_keeps_one_part(monkeypatch):
    monkeypatch.setattr(threads, "compute_threads", lambda: 1)
    assert row_product.parts_for(np.zeros((1120, 256), np.float32),
                                 np.zeros((10000, 256), np.float32)) == 1
