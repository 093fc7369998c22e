"""gluon.loss: every loss against a NumPy formula, its gradients against central finite
differences in float64, hybridized == imperative, label reshaping and weighting."""
import numpy as np
import pytest

from minigluon import autograd, gluon, nd
from minigluon.base import MXNetError, ShapeError
from minigluon.gluon import loss as gloss


# ---- helpers ------------------------------------------------------------------------------
def rand(*shape, seed=0, low=0.2, high=1.5):
    """float64 values of magnitude in [low, high] with random signs."""
    rng = np.random.default_rng(seed)
    return rng.uniform(low, high, shape) * rng.choice([-1.0, 1.0], shape)


def _as_nd(x):
    return nd.array(x, dtype="float64") if isinstance(x, np.ndarray) else x


def run(loss, inputs, head_seed=1):
    """Loss values and the gradients of sum(head * loss) for the numpy (float) inputs;
    NDArray inputs (class indices) and None are passed through without gradients."""
    args = [_as_nd(x) for x in inputs]
    for a, x in zip(args, inputs):
        if isinstance(x, np.ndarray):
            a.attach_grad()
    with autograd.record():
        out = loss(*args)
    head = np.random.default_rng(head_seed).standard_normal(out.shape)
    out.backward(nd.array(head, dtype="float64"))
    return out.asnumpy(), [a.grad.asnumpy() for a, x in zip(args, inputs)
                           if isinstance(x, np.ndarray)], head


def check_grads(loss, *inputs, eps=1e-6, rtol=1e-5, atol=1e-8):
    _, grads, head = run(loss, inputs)
    positions = [i for i, x in enumerate(inputs) if isinstance(x, np.ndarray)]
    for pos, got in zip(positions, grads):
        numeric = np.zeros(inputs[pos].shape)
        for idx in np.ndindex(*inputs[pos].shape):
            vals = []
            for sign in (1, -1):
                moved = [x.copy() if isinstance(x, np.ndarray) else x for x in inputs]
                moved[pos][idx] += sign * eps
                vals.append(float((loss(*[_as_nd(x) for x in moved]).asnumpy() * head).sum()))
            numeric[idx] = (vals[0] - vals[1]) / (2 * eps)
        np.testing.assert_allclose(got, numeric, rtol=rtol, atol=atol,
                                   err_msg=f"gradient of input {pos}")


def check_hybrid_equal(loss, *inputs):
    """Hybridized outputs and gradients equal imperative ones bit for bit."""
    out1, grads1, _ = run(loss, inputs)
    loss.hybridize()
    run(loss, inputs)                                  # traces the graph
    out2, grads2, _ = run(loss, inputs)
    loss.hybridize(False)
    np.testing.assert_array_equal(out1, out2)
    for g1, g2 in zip(grads1, grads2):
        np.testing.assert_array_equal(g1, g2)


def check_loss(loss, inputs, want, rtol=1e-10, atol=1e-12):
    """Forward against `want`, gradients against finite differences, hybrid identical."""
    got = loss(*[_as_nd(x) for x in inputs]).asnumpy()
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
    check_grads(loss, *inputs)
    check_hybrid_equal(loss, *inputs)


def per_sample(values, batch_axis=0):
    """Mean over every axis but the batch axis."""
    axes = tuple(i for i in range(values.ndim) if i != batch_axis)
    return values.mean(axis=axes) if axes else values


def softplus(x):
    return np.log1p(np.exp(-np.abs(x))) + np.maximum(x, 0)


# ---- element-wise regression losses --------------------------------------------------------
REGRESSION = [  # (loss factory, element-wise formula of (pred, label))
    (lambda **kw: gloss.L2Loss(**kw), lambda p, y: 0.5 * (y - p) ** 2),
    (lambda **kw: gloss.L1Loss(**kw), lambda p, y: np.abs(y - p)),
    (lambda **kw: gloss.HuberLoss(**kw),
     lambda p, y: np.where(np.abs(y - p) > 1, np.abs(y - p) - 0.5, 0.5 * (y - p) ** 2)),
    (lambda **kw: gloss.HuberLoss(rho=0.5, **kw),
     lambda p, y: np.where(np.abs(y - p) > 0.5, np.abs(y - p) - 0.25, (y - p) ** 2)),
]


@pytest.mark.parametrize("make,formula", REGRESSION)
@pytest.mark.parametrize("shape", [(4,), (3, 2), (2, 3, 2)])
def test_regression_losses(make, formula, shape):
    pred, label = rand(*shape, seed=1), rand(*shape, seed=2)
    check_loss(make(), [pred, label], per_sample(formula(pred, label)))


@pytest.mark.parametrize("make,formula", REGRESSION)
def test_weight_sample_weight_and_batch_axis(make, formula):
    pred, label = rand(3, 4, seed=1), rand(3, 4, seed=2)
    sample_weight = rand(3, 1, seed=3)
    base = formula(pred, label)
    check_loss(make(weight=2.5), [pred, label, sample_weight],
               per_sample(base * sample_weight * 2.5))
    check_loss(make(batch_axis=1), [pred, label], per_sample(base, batch_axis=1))


def test_l2_loss_default_weight_is_one():
    pred, label = rand(2, 3, seed=1), rand(2, 3, seed=2)
    np.testing.assert_allclose(gloss.L2Loss()(_as_nd(pred), _as_nd(label)).asnumpy(),
                               per_sample(0.5 * (pred - label) ** 2), rtol=1e-12)
    np.testing.assert_allclose(gloss.L2Loss(weight=3.)(_as_nd(pred), _as_nd(label)).asnumpy(),
                               per_sample(1.5 * (pred - label) ** 2), rtol=1e-12)


# ---- label reshaping ----------------------------------------------------------------------
def test_label_is_reshaped_to_pred():
    pred, label = rand(5, 1, seed=1), rand(5, seed=2)
    want = per_sample(0.5 * (pred - label[:, None]) ** 2)
    check_loss(gloss.L2Loss(), [pred, label], want)
    with pytest.raises(ShapeError, match=r"label of shape \(4,\).*shape \(5, 1\)"):
        gloss.L2Loss()(_as_nd(pred), nd.ones((4,), dtype="float64"))


class _Regressor(gluon.HybridBlock):
    """A loss traced inside a bigger hybridized graph."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.loss = gloss.L2Loss()

    def hybrid_forward(self, F, x, y):
        return self.loss(x * 2, y)


def test_label_reshaped_inside_hybridized_parent_with_new_batch_size():
    net = _Regressor()
    x, y = rand(6, 1, seed=1), rand(6, seed=2)
    net.hybridize()
    for n in (6, 6, 4):       # trace on the first call, replay later, with a smaller batch
        got = net(_as_nd(x[:n]), _as_nd(y[:n])).asnumpy()
        np.testing.assert_allclose(got, 0.5 * (2 * x[:n, 0] - y[:n]) ** 2, rtol=1e-12)


# ---- classification losses ----------------------------------------------------------------
def log_softmax(x, axis=-1):
    z = x - x.max(axis=axis, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=axis, keepdims=True))


@pytest.mark.parametrize("shape,axis", [((4, 5), -1), ((3, 4, 2), 1)])
def test_softmax_ce_sparse(shape, axis):
    pred = rand(*shape, seed=1)
    label_shape = tuple(n for i, n in enumerate(shape) if i != axis % len(shape))
    label = np.random.default_rng(2).integers(0, shape[axis], label_shape)
    logp = log_softmax(pred, axis)
    picked = np.take_along_axis(logp, np.expand_dims(label, axis), axis=axis)
    label_nd = nd.array(label, dtype="float64")
    check_loss(gloss.SoftmaxCrossEntropyLoss(axis=axis), [pred, label_nd], per_sample(-picked))
    check_loss(gloss.SoftmaxCELoss(axis=axis, from_logits=True), [logp, label_nd],
               per_sample(-picked))
    sample_weight = rand(shape[0], *([1] * (len(shape) - 1)), seed=4)
    check_loss(gloss.SoftmaxCELoss(axis=axis, weight=0.5), [pred, label_nd, sample_weight],
               per_sample(-picked * sample_weight * 0.5))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("hybrid", [False, True])
def test_softmax_ce_sparse_last_axis_is_the_unfused_formula(dtype, hybrid):
    """The common case (sparse labels, class axis last) runs one fused operator: values and
    gradients as log_softmax + pick gave them, for a language model's (T, N, C) output."""
    rng = np.random.default_rng(5)
    pred = (rng.standard_normal((5, 3, 700)) * 3).astype(dtype)
    label = nd.array(rng.integers(0, 700, (5, 3)), dtype="float32")
    weight = nd.array(rng.uniform(0.5, 2, (5, 1, 1)), dtype=dtype)
    tol = dict(rtol=3e-6, atol=3e-7) if dtype == "float32" else dict(rtol=1e-12, atol=1e-14)

    def value_and_grad(loss):
        a = nd.array(pred, dtype=dtype)
        a.attach_grad()
        with autograd.record():
            out = loss(a, label, weight)
        out.backward()
        return out.asnumpy(), a.grad.asnumpy()
    fused = gloss.SoftmaxCrossEntropyLoss()
    if hybrid:
        fused.hybridize()
        value_and_grad(fused)                           # traces the graph
    unfused = gloss.SoftmaxCrossEntropyLoss(axis=2)     # the same loss on the old path
    for got, want in zip(value_and_grad(fused), value_and_grad(unfused)):
        np.testing.assert_allclose(got, want, **tol)


def test_softmax_ce_dense_label():
    pred = rand(3, 4, seed=1)
    label = np.exp(log_softmax(rand(3, 4, seed=2)))
    want = -(log_softmax(pred) * label).sum(-1)
    check_loss(gloss.SoftmaxCELoss(sparse_label=False), [pred, label], want)
    check_loss(gloss.SoftmaxCELoss(sparse_label=False), [pred, label.reshape(12)], want)


@pytest.mark.parametrize("shape", [(6,), (3, 2), (2, 2, 2)])
def test_sigmoid_bce_from_logits(shape):
    pred = rand(*shape, seed=1, high=4)
    label = np.random.default_rng(2).integers(0, 2, shape).astype(np.float64)
    want = softplus(pred) - pred * label
    check_loss(gloss.SigmoidBinaryCrossEntropyLoss(), [pred, label], per_sample(want))
    pos_weight = rand(*shape[1:], seed=3, low=0.5, high=2) ** 2 if len(shape) > 1 else \
        np.array([2.0])
    weighted = pos_weight * label * softplus(-pred) + (1 - label) * softplus(pred)
    check_loss(gloss.SigmoidBCELoss(), [pred, label, None, pos_weight], per_sample(weighted))


def test_sigmoid_bce_is_stable_for_large_logits():
    pred = np.array([[-200.0, -30.0, 0.0, 30.0, 200.0]])
    label = np.array([[1.0, 0.0, 1.0, 1.0, 0.0]])
    got = gloss.SigmoidBCELoss()(_as_nd(pred), _as_nd(label)).asnumpy()
    tiny = np.log1p(np.exp(-30.0))
    np.testing.assert_allclose(got, [(200 + tiny + np.log(2) + tiny + 200) / 5], rtol=1e-12)
    assert np.isfinite(got).all()


def test_sigmoid_bce_from_sigmoid():
    prob = np.random.default_rng(1).uniform(0.05, 0.95, (3, 2))
    label = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    eps = 1e-12
    want = -(np.log(prob + eps) * label + np.log(1 - prob + eps) * (1 - label))
    check_loss(gloss.SigmoidBCELoss(from_sigmoid=True), [prob, label], per_sample(want))
    pos_weight = np.array([3.0, 0.5])
    want = -(np.log(prob + eps) * label * pos_weight + np.log(1 - prob + eps) * (1 - label))
    check_loss(gloss.SigmoidBCELoss(from_sigmoid=True), [prob, label, None, pos_weight],
               per_sample(want))


@pytest.mark.parametrize("from_logits", [True, False])
def test_kl_div(from_logits):
    pred = rand(3, 4, seed=1)
    label = np.exp(log_softmax(rand(3, 4, seed=2)))
    logp = pred if from_logits else log_softmax(pred)
    want = per_sample(label * (np.log(label + 1e-12) - logp))
    check_loss(gloss.KLDivLoss(from_logits=from_logits), [pred, label], want)


MARGIN = [  # (loss, formula of (pred, signed label))
    (gloss.HingeLoss(), lambda p, y: np.maximum(0, 1 - p * y)),
    (gloss.HingeLoss(margin=2), lambda p, y: np.maximum(0, 2 - p * y)),
    (gloss.SquaredHingeLoss(), lambda p, y: np.maximum(0, 1 - p * y) ** 2),
    (gloss.LogisticLoss(), lambda p, y: np.log1p(np.exp(-p * y))),
]


@pytest.mark.parametrize("loss,formula", MARGIN)
def test_margin_losses(loss, formula):
    pred = rand(4, 3, seed=1, low=0.1, high=0.8) * 2.5         # |pred * label| != margin
    label = np.sign(rand(4, 3, seed=2))
    check_loss(loss, [pred, label], per_sample(formula(pred, label)))


def test_logistic_loss_binary_labels():
    pred = rand(5, seed=1)
    label = np.array([1.0, 0.0, 0.0, 1.0, 1.0])
    check_loss(gloss.LogisticLoss(label_format="binary"), [pred, label],
               np.log1p(np.exp(-pred * (2 * label - 1))))
    with pytest.raises(MXNetError, match="label_format"):
        gloss.LogisticLoss(label_format="other")


def test_repr_and_hybrid_block():
    assert repr(gloss.L2Loss()) == "L2Loss(batch_axis=0, w=1.0)"
    assert repr(gloss.SoftmaxCELoss(weight=2)) == "SoftmaxCrossEntropyLoss(batch_axis=0, w=2)"
    assert gloss.SoftmaxCELoss is gloss.SoftmaxCrossEntropyLoss
    assert gloss.SigmoidBCELoss is gloss.SigmoidBinaryCrossEntropyLoss
    assert isinstance(gloss.L1Loss(), gluon.HybridBlock)
    with pytest.raises(MXNetError, match="weight must be a number"):
        gloss.L1Loss(weight="x")(nd.ones((2, 1)), nd.ones((2, 1)))


# ---- embedding and count losses ------------------------------------------------------------
@pytest.mark.parametrize("shape,margin", [((4, 3), 1), ((3, 2, 2), 0.5)])
def test_triplet_loss(shape, margin):
    anchor, pos, neg = rand(*shape, seed=1), rand(*shape, seed=2), rand(*shape, seed=3)
    axes = tuple(range(1, len(shape)))
    before = ((pos - anchor) ** 2 - (neg - anchor) ** 2).sum(axis=axes) + margin
    assert (np.abs(before) > 1e-3).all()          # away from the kink, for finite differences
    want = np.maximum(before, 0)
    check_loss(gloss.TripletLoss(margin=margin), [anchor, pos, neg], want)
    weight = rand(shape[0], seed=4)
    check_loss(gloss.TripletLoss(margin=margin, weight=2), [anchor, pos, neg, weight],
               2 * want * weight)


def test_triplet_loss_names_a_mis_sized_input():
    with pytest.raises(ShapeError, match=r"negative of shape \(4, 2\) cannot be reshaped to "
                                         r"the anchors' shape \(4, 3\)"):
        gloss.TripletLoss()(nd.ones((4, 3)), nd.ones((4, 3)), nd.ones((4, 2)))


def cosine(a, b):
    return (a * b).sum(-1) / np.maximum(np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1),
                                        1e-12)


@pytest.mark.parametrize("margin", [0, 0.2])
def test_cosine_embedding_loss(margin):
    a, b = rand(6, 5, seed=1), rand(6, 5, seed=2)
    label = np.array([1, -1, 1, -1, -1, 0], dtype=np.float64)     # 0: neither, loss 0
    cos = cosine(a, b)
    want = np.where(label == 1, 1 - cos, np.where(label == -1, np.maximum(cos - margin, 0), 0))
    assert (np.abs(cos - margin) > 1e-3).all()
    check_loss(gloss.CosineEmbeddingLoss(margin=margin), [a, b, nd.array(label, dtype="float64")],
               want.reshape(-1, 1))      # (N, 1), as MXNet's


def test_cosine_embedding_loss_is_weighted_per_pair_not_averaged():
    a, b = rand(4, 3, seed=3), rand(4, 3, seed=4)
    label = nd.array([1, -1, 1, -1], dtype="float64")
    plain = gloss.CosineEmbeddingLoss()(_as_nd(a), _as_nd(b), label).asnumpy()
    weights = np.array([[1.0], [0.0], [2.0], [0.5]])
    got = gloss.CosineEmbeddingLoss(weight=3.0)(_as_nd(a), _as_nd(b), label,
                                               nd.array(weights, dtype="float64")).asnumpy()
    assert plain.shape == got.shape == (4, 1)
    np.testing.assert_allclose(got, 3.0 * weights * plain, rtol=1e-12)


def test_cosine_embedding_loss_of_a_zero_vector_is_finite():
    out = gloss.CosineEmbeddingLoss()(nd.zeros((2, 3)), nd.ones((2, 3)), nd.array([1, -1]))
    np.testing.assert_array_equal(out.asnumpy(), [[1], [0]])


def test_cosine_embedding_loss_names_bad_shapes():
    with pytest.raises(ShapeError, match=r"input1 of shape \(2, 4\) cannot be reshaped"):
        gloss.CosineEmbeddingLoss()(nd.ones((2, 4)), nd.ones((2, 3)), nd.ones(2))
    with pytest.raises(ShapeError, match=r"label of shape \(3,\) does not give one label per"):
        gloss.CosineEmbeddingLoss()(nd.ones((2, 3)), nd.ones((2, 3)), nd.ones(3))


@pytest.mark.parametrize("from_logits", [True, False])
@pytest.mark.parametrize("compute_full", [False, True])
def test_poisson_nll_loss(from_logits, compute_full):
    pred = rand(4, 3, seed=1)
    if not from_logits:
        pred = np.abs(pred)                                # rates
    target = np.random.default_rng(5).poisson(2.0, (4, 3)).astype(np.float64)
    assert (target <= 1).any() and (target > 1).any()
    elem = np.exp(pred) - target * pred if from_logits else pred - target * np.log(pred + 1e-8)
    if compute_full:
        t = np.maximum(target, 1)
        elem = elem + (target > 1) * (t * np.log(t) - t + 0.5 * np.log(2 * np.pi * t))
    loss = gloss.PoissonNLLLoss(from_logits=from_logits, compute_full=compute_full)
    check_loss(loss, [pred, nd.array(target, dtype="float64")], [elem.mean()])


# ---- SDMLLoss -----------------------------------------------------------------------------
def _sdml_formula(x1, x2, smoothing):
    n = x1.shape[0]
    dist = ((x1[:, None, :] - x2[None, :, :]) ** 2).sum(axis=2)
    logits = -dist - (-dist).max(axis=1, keepdims=True)
    log_p = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    targets = np.where(np.eye(n) == 1, 1 - smoothing, smoothing / (n - 1))
    return (targets * (np.log(targets) - log_p)).mean(axis=1)


@pytest.mark.parametrize("smoothing, weight", [(0.3, 1.0), (0.1, 2.5)])
def test_sdml_loss_formula_and_gradients(smoothing, weight):
    x1, x2 = rand(4, 3, seed=2), rand(4, 3, seed=3)
    loss = gloss.SDMLLoss(smoothing_parameter=smoothing, weight=weight)
    got = loss(_as_nd(x1), _as_nd(x2)).asnumpy()
    np.testing.assert_allclose(got, weight * _sdml_formula(x1, x2, smoothing), rtol=1e-10)
    check_grads(loss, x1, x2)


def test_sdml_loss_names_bad_inputs():
    with pytest.raises(ShapeError, match=r"N >= 2, got \(3, 2\) and \(3, 3\)"):
        gloss.SDMLLoss()(nd.ones((3, 2)), nd.ones((3, 3)))
    with pytest.raises(ShapeError, match="N >= 2"):
        gloss.SDMLLoss()(nd.ones((1, 2)), nd.ones((1, 2)))
    with pytest.raises(MXNetError, match=r"smoothing_parameter must be in \[0, 1\), got 1.5"):
        gloss.SDMLLoss(smoothing_parameter=1.5)
