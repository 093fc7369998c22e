"""A language model's head allocates what it must and no more: the decoder (Dense with
flatten=False over (T, N, H)) reshapes without copying and adds its bias in place, its
backward makes no array the size of its output gradient (the bias gradient is a sum, the
weight gradient one product on a transposed view), and the fused softmax cross-entropy
keeps nothing the size of the logits forward and makes one such array, the gradient,
backward. Measured with tracemalloc, which sees NumPy's allocations."""
import tracemalloc

import numpy as np

from minigluon import autograd, nd
from minigluon.gluon import loss as gloss
from minigluon.gluon import nn

T, N, H, VOCAB = 10, 7, 16, 4000


def _peak_bytes(fn):
    """The most memory traced at once while fn runs, above what was traced before."""
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        fn()
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def _decoder():
    dense = nn.Dense(VOCAB, flatten=False, in_units=H)
    dense.initialize()
    x = nd.array(np.random.default_rng(0).standard_normal((T, N, H)).astype(np.float32))
    x.attach_grad()
    _step(lambda: dense(x))        # first calls set up what later steps reuse
    return dense, x


def _step(forward):
    with autograd.record():
        out = forward()
    out.backward()


def test_decoder_forward_makes_only_its_output():
    dense, x = _decoder()
    out_bytes = T * N * VOCAB * 4
    with autograd.record():
        peak = _peak_bytes(lambda: dense(x).wait_to_read())
    assert out_bytes <= peak < 1.25 * out_bytes, (peak, out_bytes)


def test_decoder_backward_copies_nothing_the_size_of_its_output():
    dense, x = _decoder()
    head = nd.ones((T, N, VOCAB))
    with autograd.record():
        y = dense(x)
    peak = _peak_bytes(lambda: (y.backward(head), x.grad.wait_to_read()))
    # dx (T*N, H), the weight gradient (VOCAB, H) and the bias gradient: 1/4 of dy's size
    assert peak < 0.35 * head.size * 4, (peak, head.size * 4)


def test_fused_loss_keeps_one_logits_sized_array():
    rng = np.random.default_rng(1)
    logits = nd.array(rng.standard_normal((T, N, VOCAB)).astype(np.float32))
    label = nd.array(rng.integers(0, VOCAB, (T, N)), dtype="float32")
    logits.attach_grad()
    size = logits.size * 4
    loss_fn = gloss.SoftmaxCrossEntropyLoss()
    _step(lambda: loss_fn(logits, label))
    with autograd.record():
        forward = {}
        forward["peak"] = _peak_bytes(lambda: forward.setdefault("loss", loss_fn(logits, label)))
    loss = forward["loss"]
    assert forward["peak"] < 0.1 * size, forward["peak"]      # the losses and row statistics
    backward = _peak_bytes(lambda: (loss.backward(), logits.grad.wait_to_read()))
    assert size <= backward < 1.25 * size, (backward, size)   # the gradient, once
