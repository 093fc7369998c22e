"""A language model's decoder runs on every compute thread: a recurrent layer holds BLAS
to one thread only for its per-step products (ndarray/one_blas_thread.py), and the
(T*N, H) x (H, vocab) decoder product and its two backward products come after that
stretch (forward) or before it (backward), with BLAS back at `threads.compute_threads()`."""
import pytest
from threadpoolctl import threadpool_info

from minigluon import autograd, config, nd, threads
from minigluon.gluon import nn, rnn


def _blas_counts():
    return {lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}


class Probe(autograd.Function):
    """The identity, noting the BLAS thread count when its forward and backward run."""

    def __init__(self, seen, name):
        super().__init__()
        self.seen, self.name = seen, name

    def forward(self, x):
        self.seen.append((self.name, "forward", _blas_counts()))
        return x.copy()

    def backward(self, dy):
        self.seen.append((self.name, "backward", _blas_counts()))
        return dy


def test_decoder_products_run_on_every_compute_thread(monkeypatch):
    if config.usable_cores() < 2 or not _blas_counts():
        pytest.skip("needs 2 usable cores and a BLAS that threadpoolctl sees")
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    monkeypatch.setenv("MINIGLUON_ADAPTIVE_THREADS", "0")
    threads.look_again()
    seen = []
    try:
        lstm = rnn.LSTM(16, num_layers=2, layout="TNC", input_size=8)
        decoder = nn.Dense(50, flatten=False, in_units=16)
        lstm.initialize()
        decoder.initialize()
        x = nd.random.uniform(shape=(5, 4, 8))
        with autograd.record():
            # the probes bracket the decoder: nothing between them changes BLAS's count
            h = Probe(seen, "into decoder")(lstm(x))
            y = Probe(seen, "out of decoder")(decoder(h))
        y.backward()
    finally:
        monkeypatch.undo()
        threads.look_again()
    assert seen == [("into decoder", "forward", {2}), ("out of decoder", "forward", {2}),
                    ("out of decoder", "backward", {2}), ("into decoder", "backward", {2})]
