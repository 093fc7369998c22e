"""CTC loss (nd.CTCLoss and gluon.loss.CTCLoss) against the definition: the sum over every
path of per-step softmax probabilities whose collapse is the label, enumerated by brute
force; gradients against central finite differences; lengths, layouts, hybridization,
infeasible labels and bad input."""
import itertools

import numpy as np
import pytest

import minigluon as mx
from minigluon import autograd, gluon, nd
from minigluon.base import MXNetError, ShapeError


def brute_force(scores, label, blank):
    """-log of the total probability of the paths over `scores` (T, C) collapsing to
    `label`: merge repeated classes, then drop blanks."""
    probs = np.exp(scores - scores.max(axis=1, keepdims=True))
    probs /= probs.sum(axis=1, keepdims=True)
    total = 0.0
    for path in itertools.product(range(scores.shape[1]), repeat=scores.shape[0]):
        merged = [k for i, k in enumerate(path) if i == 0 or k != path[i - 1]]
        if [k for k in merged if k != blank] == list(label):
            total += np.prod(probs[np.arange(len(path)), path])
    return -np.log(total) if total > 0 else np.inf


def op_loss_and_grad(data, label, head, **kwargs):
    x = nd.array(data, dtype="float64")
    x.attach_grad()
    with autograd.record():
        loss = nd.CTCLoss(x, nd.array(label), **kwargs)
    loss.backward(nd.array(head, dtype="float64"))
    return loss.asnumpy(), x.grad.asnumpy()


CASES = [  # (T, C, labels padded with 0 (blank first), data_lengths or None)
    (4, 3, [[1, 2], [1, 1], [2, 0]], None),
    (5, 4, [[3, 1, 3], [2, 0, 0], [0, 0, 0]], [5, 3, 2]),     # an empty label, short data
    (3, 2, [[1, 1]], None),                                   # repeats need a blank between
]


@pytest.mark.parametrize("steps,classes,labels,lengths", CASES)
def test_op_matches_the_definition_and_finite_differences(steps, classes, labels, lengths):
    rng = np.random.default_rng(steps)
    data = rng.standard_normal((steps, len(labels), classes))
    kwargs = {} if lengths is None else {"data_lengths": nd.array(lengths),
                                         "use_data_lengths": True}
    used = lengths or [steps] * len(labels)
    want = [brute_force(data[:used[n], n], [k for k in lab if k != 0], 0)
            for n, lab in enumerate(labels)]
    head = rng.standard_normal(len(labels))
    loss, grad = op_loss_and_grad(data, labels, head, **kwargs)
    np.testing.assert_allclose(loss, want, rtol=1e-10)

    def objective(values):
        out = nd.CTCLoss(nd.array(values, dtype="float64"), nd.array(labels), **kwargs)
        return float((out.asnumpy() * head).sum())
    numeric = np.zeros_like(data)
    for idx in np.ndindex(*data.shape):
        up, down = data.copy(), data.copy()
        up[idx] += 1e-6
        down[idx] -= 1e-6
        numeric[idx] = (objective(up) - objective(down)) / 2e-6
    np.testing.assert_allclose(grad, numeric, rtol=1e-5, atol=1e-8)
    for n, length in enumerate(used):              # nothing flows past a sample's length
        assert not grad[length:, n].any()


def test_infeasible_label_is_infinite_with_zero_gradient():
    data = np.random.default_rng(0).standard_normal((2, 1, 3))
    loss, grad = op_loss_and_grad(data, [[1, 1]], np.ones(1))      # needs 3 steps
    assert loss[0] == np.inf and brute_force(data[:, 0], [1, 1], 0) == np.inf
    assert not grad.any()


@pytest.mark.parametrize("layout,label_layout", [("NTC", "NT"), ("TNC", "TN")])
def test_gluon_loss_uses_the_last_class_as_blank(layout, label_layout):
    rng = np.random.default_rng(1)
    scores = rng.standard_normal((3, 5, 4))                     # N, T, C; blank = 3
    labels = np.array([[0, 2, -1], [1, 1, 2], [2, -1, -1]])
    want = [brute_force(scores[n], [k for k in labels[n] if k >= 0], 3) for n in range(3)]
    pred = scores if layout == "NTC" else scores.transpose(1, 0, 2)
    label = labels if label_layout == "NT" else labels.T
    loss_fn = gluon.loss.CTCLoss(layout=layout, label_layout=label_layout)
    got = loss_fn(nd.array(pred, dtype="float64"), nd.array(label)).asnumpy()
    np.testing.assert_allclose(got, want, rtol=1e-10)
    # lengths given explicitly, and a sample weight
    short = loss_fn(nd.array(pred, dtype="float64"), nd.array(label), nd.array([5, 4, 2]),
                    nd.array([2, 3, 1]), nd.array([1.0, 2.0, 0.5], dtype="float64")).asnumpy()
    ref = [brute_force(scores[0], [0, 2], 3), 2 * brute_force(scores[1, :4], [1, 1, 2], 3),
           0.5 * brute_force(scores[2, :2], [2], 3)]
    np.testing.assert_allclose(short, ref, rtol=1e-10)
    loss_fn.hybridize()
    for _ in range(2):
        again = loss_fn(nd.array(pred, dtype="float64"), nd.array(label)).asnumpy()
        np.testing.assert_array_equal(again, got)


def test_bad_input_is_named():
    data = nd.zeros((4, 2, 3))
    with pytest.raises(ShapeError, match=r"label 0 holds \[1, 3\], but labels must be classes "
                                         r"in \[0, 3\) \(the blank is 0\)"):
        nd.CTCLoss(data, nd.array([[1, 3], [1, 2]]))
    with pytest.raises(ShapeError, match=r"label 1 holds \[-2\]"):
        nd.CTCLoss(data, nd.array([[1, 2], [-2, 1]]), None, nd.array([2, 1]),
                   use_label_lengths=True)
    with pytest.raises(ShapeError, match=r"data_lengths must be in \[1, 4\], got \[5, 1\]"):
        nd.CTCLoss(data, nd.array([[1, 2], [1, 2]]), nd.array([5, 1]), use_data_lengths=True)
    with pytest.raises(ShapeError, match=r"data must be \(T, N, C\) and label \(N, L\)"):
        nd.CTCLoss(data, nd.array([[1, 2]]))
    with pytest.raises(MXNetError, match="layout must be 'NTC' or 'TNC'"):
        gluon.loss.CTCLoss(layout="NCT")


def test_a_model_learns_a_label_sequence():
    """Scores for 6 steps, learned directly, come to spell the label [0, 1, 1, 2]."""
    mx.random.seed(0)
    scores = gluon.Parameter("scores", shape=(1, 6, 4))
    scores.initialize(mx.init.Normal(0.1))
    trainer = gluon.Trainer([scores], "adam", {"learning_rate": 0.1})
    loss_fn = gluon.loss.CTCLoss()
    label = nd.array([[0, 1, 1, 2]])
    for _ in range(80):
        with autograd.record():
            loss = loss_fn(scores.data(), label)
        loss.backward()
        trainer.step(1)
    best = scores.data().asnumpy()[0].argmax(axis=1).tolist()
    merged = [k for i, k in enumerate(best) if i == 0 or k != best[i - 1]]
    assert [k for k in merged if k != 3] == [0, 1, 1, 2], best
    assert float(loss.asscalar()) < 0.1


def test_the_blank_class_inside_a_label_takes_a_lattice_slot_as_in_mxnet():
    """MXNet accepts the blank inside a label's length (its tests pass [3, 2, 2] with blank
    3): the blank then fills a label slot like any class. With uniform scores the loss only
    depends on the label's shape, so [3, 2, 2] scores as [2, 1, 1] does."""
    loss_fn = gluon.loss.CTCLoss()
    scores = nd.ones((2, 20, 4), dtype="float64")
    with_blank = loss_fn(scores, nd.array([[2, 1, 3, 3], [3, 2, 2, 3]]), None,
                         nd.array([2, 3])).asnumpy()
    plain = loss_fn(scores, nd.array([[2, 1, -1, -1], [2, 1, 1, -1]])).asnumpy()
    np.testing.assert_allclose(with_blank, plain, rtol=1e-12)
    # blank first: label 0 inside the given length is used, not taken as padding
    first = nd.CTCLoss(nd.ones((20, 1, 4), dtype="float64"), nd.array([[0, 1, 1]]), None,
                       nd.array([3]), use_label_lengths=True).asnumpy()
    np.testing.assert_allclose(first, plain[1:], rtol=1e-12)
    scores.attach_grad()
    with autograd.record():
        loss = loss_fn(scores, nd.array([[3, 3, -1], [3, 1, 2]]))
    loss.backward()
    grad = scores.grad.asnumpy()
    assert np.isfinite(grad).all()
    np.testing.assert_allclose(grad.sum(axis=2), 0.0, atol=1e-12)  # softmax minus occupancy
