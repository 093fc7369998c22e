"""`mx.gluon.loss`: losses as HybridBlocks, `loss(pred, label[, sample_weight])`.

Every loss returns one value per sample: the element-wise loss, scaled by `weight` and
`sample_weight` (which broadcasts against it), averaged over every axis but `batch_axis`.
"""
from .. import ndarray as nd
from ..base import MXNetError, ShapeError, numeric_types
from ..ndarray.ndarray import NDArray
from .block import HybridBlock


def _apply_weighting(F, loss, weight=None, sample_weight=None):
    """loss * sample_weight (broadcast) * weight (a number); either may be None."""
    if sample_weight is not None:
        loss = F.broadcast_mul(loss, sample_weight)
    if weight is not None:
        if not isinstance(weight, numeric_types()):
            raise MXNetError(f"loss weight must be a number, got {weight!r}")
        loss = loss * weight
    return loss


class Loss(HybridBlock):
    """Base class of the losses.

    Parameters
    ----------
    weight : float or None
        Global scale of the loss.
    batch_axis : int
        The axis that indexes samples; the loss is averaged over all others.
    """

    # losses that compare label and pred element-wise reshape label to pred's shape
    _label_like_pred = False

    def __init__(self, weight, batch_axis, **kwargs):
        super().__init__(**kwargs)
        self._weight = weight
        self._batch_axis = batch_axis

    def forward(self, pred, label, *args):
        if isinstance(pred, NDArray):
            if self._label_like_pred and isinstance(label, NDArray) and \
                    label.size != pred.size:
                raise ShapeError(f"{type(self).__name__}: label of shape {label.shape} cannot "
                                 f"be reshaped to the prediction's shape {pred.shape}; help: "
                                 "give one label per prediction value")
        return super().forward(pred, label, *args)

    def _reshape_like_pred(self, F, label, pred):
        """label in pred's shape, as MXNet's losses do before comparing them."""
        if F is nd and label.shape == pred.shape:
            return label
        return F.reshape_like(label, pred)

    def _mean(self, F, loss, sample_weight, weight=None):
        loss = _apply_weighting(F, loss, self._weight if weight is None else weight,
                                sample_weight)
        return F.mean(loss, axis=self._batch_axis, exclude=True)

    def __repr__(self):
        return f"{type(self).__name__}(batch_axis={self._batch_axis}, w={self._weight})"

    def hybrid_forward(self, F, x, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} must define hybrid_forward()")


class L2Loss(Loss):
    """Squared error: 0.5 * weight * (label - pred)^2, averaged per sample.

    Inputs:
        - **pred**: (N, ...).
        - **label**: same number of elements as pred (reshaped to its shape).
        - **sample_weight**: broadcastable to pred's shape, or None.
    Outputs:
        - **loss**: (N,).
    """

    _label_like_pred = True

    def __init__(self, weight=1., batch_axis=0, **kwargs):
        super().__init__(weight, batch_axis, **kwargs)

    def hybrid_forward(self, F, pred, label, sample_weight=None):
        label = self._reshape_like_pred(F, label, pred)
        loss = F.square(label - pred)
        return self._mean(F, loss, sample_weight, self._weight / 2)


class L1Loss(Loss):
    """Absolute error: weight * |label - pred|, averaged per sample.

    Inputs:
        - **pred**: (N, ...).
        - **label**: same number of elements as pred (reshaped to its shape).
        - **sample_weight**: broadcastable to pred's shape, or None.
    Outputs:
        - **loss**: (N,).
    """

    _label_like_pred = True

    def __init__(self, weight=None, batch_axis=0, **kwargs):
        super().__init__(weight, batch_axis, **kwargs)

    def hybrid_forward(self, F, pred, label, sample_weight=None):
        label = self._reshape_like_pred(F, label, pred)
        return self._mean(F, F.abs(label - pred), sample_weight)


class SigmoidBinaryCrossEntropyLoss(Loss):
    """Binary cross-entropy of sigmoid(pred) (or of pred with from_sigmoid=True).

    Logits use the stable form max(x, 0) - x * z + log(1 + exp(-|x|)). `pos_weight`
    (broadcastable to pred) scales the loss of positive labels.

    Inputs:
        - **pred**: (N, ...), logits (or probabilities with from_sigmoid=True).
        - **label**: 0/1 targets, same number of elements as pred.
        - **sample_weight**: broadcastable to pred's shape, or None.
        - **pos_weight**: broadcastable to pred's shape, or None.
    Outputs:
        - **loss**: (N,).
    """

    _label_like_pred = True

    def __init__(self, from_sigmoid=False, weight=None, batch_axis=0, **kwargs):
        super().__init__(weight, batch_axis, **kwargs)
        self._from_sigmoid = from_sigmoid

    def hybrid_forward(self, F, pred, label, sample_weight=None, pos_weight=None):
        label = self._reshape_like_pred(F, label, pred)
        if self._from_sigmoid:
            loss = self._from_probabilities(F, pred, label, pos_weight)
        elif pos_weight is None:
            loss = F.relu(pred) - pred * label + \
                F.Activation(-F.abs(pred), act_type="softrelu")
        else:
            # x - x*z + (1 + (pos_weight - 1) * z) * log(1 + exp(-x)), written stably
            log_weight = 1 + F.broadcast_mul(pos_weight - 1, label)
            loss = pred - pred * label + log_weight * \
                (F.Activation(-F.abs(pred), act_type="softrelu") + F.relu(-pred))
        return self._mean(F, loss, sample_weight)

    @staticmethod
    def _from_probabilities(F, pred, label, pos_weight):
        eps = 1e-12
        positive = F.log(pred + eps) * label
        if pos_weight is not None:
            positive = F.broadcast_mul(positive, pos_weight)
        return -(positive + F.log(1. - pred + eps) * (1. - label))


SigmoidBCELoss = SigmoidBinaryCrossEntropyLoss


class SoftmaxCrossEntropyLoss(Loss):
    """Cross-entropy between softmax(pred) along `axis` and the label.

    With sparse labels on the last axis (the defaults) it is one operator,
    `_softmax_ce_loss` (log_softmax, pick and both gradients in a pass or two per row).

    Parameters
    ----------
    axis : int
        The class axis.
    sparse_label : bool
        True: label holds class indices; False: label holds a distribution per sample.
    from_logits : bool
        True: pred already holds log-probabilities.

    Inputs:
        - **pred**: (N, ..., C, ...).
        - **label**: class indices of pred's shape without `axis` (sparse_label), else
          pred's shape.
        - **sample_weight**: broadcastable to pred's shape with `axis` of size 1, or None.
    Outputs:
        - **loss**: (N,).
    """

    def __init__(self, axis=-1, sparse_label=True, from_logits=False, weight=None,
                 batch_axis=0, **kwargs):
        super().__init__(weight, batch_axis, **kwargs)
        self._axis = axis
        self._sparse_label = sparse_label
        self._from_logits = from_logits
        self._label_like_pred = not sparse_label

    def hybrid_forward(self, F, pred, label, sample_weight=None):
        if self._sparse_label and not self._from_logits and self._axis == -1:
            # one operator for log_softmax, pick and both gradients (ndarray/ops_softmax.py)
            loss = F._softmax_ce_loss(pred, label, keepdims=True)
            return self._mean(F, loss, sample_weight)
        if not self._from_logits:
            pred = F.log_softmax(pred, self._axis)
        if self._sparse_label:
            loss = -F.pick(pred, label, axis=self._axis, keepdims=True)
        else:
            label = self._reshape_like_pred(F, label, pred)
            loss = -F.sum(pred * label, axis=self._axis, keepdims=True)
        return self._mean(F, loss, sample_weight)


SoftmaxCELoss = SoftmaxCrossEntropyLoss


class KLDivLoss(Loss):
    """Kullback-Leibler divergence: label * (log(label) - pred), pred log-probabilities.

    Parameters
    ----------
    from_logits : bool
        True: pred holds log-probabilities; False: log_softmax is applied along `axis`.
    axis : int
        The class axis, for from_logits=False.

    Inputs:
        - **pred**: (N, ...).
        - **label**: probabilities broadcastable to pred's shape.
        - **sample_weight**: broadcastable to pred's shape, or None.
    Outputs:
        - **loss**: (N,).
    """

    def __init__(self, from_logits=True, axis=-1, weight=None, batch_axis=0, **kwargs):
        super().__init__(weight, batch_axis, **kwargs)
        self._from_logits = from_logits
        self._axis = axis

    def hybrid_forward(self, F, pred, label, sample_weight=None):
        if not self._from_logits:
            pred = F.log_softmax(pred, self._axis)
        loss = label * (F.log(label + 1e-12) - pred)
        return self._mean(F, loss, sample_weight)


class HuberLoss(Loss):
    """Smoothed L1: 0.5/rho * d^2 where d = |label - pred| <= rho, else d - 0.5 * rho.

    Inputs:
        - **pred**: (N, ...).
        - **label**: same number of elements as pred (reshaped to its shape).
        - **sample_weight**: broadcastable to pred's shape, or None.
    Outputs:
        - **loss**: (N,).
    """

    _label_like_pred = True

    def __init__(self, rho=1, weight=None, batch_axis=0, **kwargs):
        super().__init__(weight, batch_axis, **kwargs)
        self._rho = rho

    def hybrid_forward(self, F, pred, label, sample_weight=None):
        label = self._reshape_like_pred(F, label, pred)
        loss = F.abs(label - pred)
        loss = F.where(loss > self._rho, loss - 0.5 * self._rho,
                       (0.5 / self._rho) * F.square(loss))
        return self._mean(F, loss, sample_weight)


class _MarginLoss(Loss):
    """What HingeLoss and SquaredHingeLoss share: the gap max(0, margin - pred * label),
    squared when `_squared` is set."""

    _label_like_pred = True
    _squared = False

    def __init__(self, margin=1, weight=None, batch_axis=0, **kwargs):
        super().__init__(weight, batch_axis, **kwargs)
        self._margin = margin

    def hybrid_forward(self, F, pred, label, sample_weight=None):
        label = self._reshape_like_pred(F, label, pred)
        gap = F.relu(self._margin - pred * label)
        return self._mean(F, F.square(gap) if self._squared else gap, sample_weight)


class HingeLoss(_MarginLoss):
    """Hinge loss for labels in {-1, 1}: max(0, margin - pred * label).

    Inputs:
        - **pred**: (N, ...).
        - **label**: -1/1 targets, same number of elements as pred.
        - **sample_weight**: broadcastable to pred's shape, or None.
    Outputs:
        - **loss**: (N,).
    """


class SquaredHingeLoss(_MarginLoss):
    """Squared hinge loss for labels in {-1, 1}: max(0, margin - pred * label)^2.

    Inputs:
        - **pred**: (N, ...).
        - **label**: -1/1 targets, same number of elements as pred.
        - **sample_weight**: broadcastable to pred's shape, or None.
    Outputs:
        - **loss**: (N,).
    """

    _squared = True


class LogisticLoss(Loss):
    """Logistic loss log(1 + exp(-pred * label)) for labels in {-1, 1} ('signed') or
    {0, 1} ('binary'), computed stably.

    Inputs:
        - **pred**: (N, ...).
        - **label**: targets, same number of elements as pred.
        - **sample_weight**: broadcastable to pred's shape, or None.
    Outputs:
        - **loss**: (N,).
    """

    _label_like_pred = True

    def __init__(self, weight=None, batch_axis=0, label_format="signed", **kwargs):
        super().__init__(weight, batch_axis, **kwargs)
        if label_format not in ("signed", "binary"):
            raise MXNetError(f"LogisticLoss: label_format must be 'signed' or 'binary', got "
                             f"{label_format!r}")
        self._label_format = label_format

    def hybrid_forward(self, F, pred, label, sample_weight=None):
        label = self._reshape_like_pred(F, label, pred)
        if self._label_format == "signed":
            label = (label + 1.0) / 2.0
        loss = F.relu(pred) - pred * label + F.Activation(-F.abs(pred), act_type="softrelu")
        return self._mean(F, loss, sample_weight)


class TripletLoss(Loss):
    """Triplet margin loss: max(0, |pred - positive|^2 - |pred - negative|^2 + margin), the
    squared distances summed over every axis but `batch_axis`.

    Inputs:
        - **pred**: anchors, (N, ...).
        - **positive**, **negative**: same number of elements as pred each.
        - **sample_weight**: broadcastable to (N,), or None.
    Outputs:
        - **loss**: (N,).
    """

    def __init__(self, margin=1, weight=None, batch_axis=0, **kwargs):
        super().__init__(weight, batch_axis, **kwargs)
        self._margin = margin

    def forward(self, pred, positive, negative, *args):
        for name, other in (("positive", positive), ("negative", negative)):
            if isinstance(pred, NDArray) and isinstance(other, NDArray) and \
                    other.size != pred.size:
                raise ShapeError(f"TripletLoss: {name} of shape {other.shape} cannot be "
                                 f"reshaped to the anchors' shape {pred.shape}; help: give one "
                                 f"{name} value per anchor value")
        return HybridBlock.forward(self, pred, positive, negative, *args)

    def hybrid_forward(self, F, pred, positive, negative, sample_weight=None):
        positive = self._reshape_like_pred(F, positive, pred)
        negative = self._reshape_like_pred(F, negative, pred)
        gap = F.square(positive - pred) - F.square(negative - pred)
        loss = F.relu(F.sum(gap, axis=self._batch_axis, exclude=True) + self._margin)
        return _apply_weighting(F, loss, self._weight, sample_weight)


class CosineEmbeddingLoss(Loss):
    """Cosine embedding loss of two inputs and a label of 1 (similar) or -1 (dissimilar):
    1 - cos(input1, input2) for label 1, max(0, cos(input1, input2) - margin) for label -1,
    0 for any other label. The cosine is taken along the last axis; its denominator is
    kept at least 1e-12 so that a zero vector gives cos 0, not NaN.

    Inputs:
        - **input1**: (N, D) (or (N, ..., D)); reshaped to input2's shape.
        - **input2**: (N, D).
        - **label**: (N,) (or input2's shape without its last axis).
        - **sample_weight**: broadcastable to (N, 1), or None.
    Outputs:
        - **loss**: (N, 1), one row per pair (as MXNet's), weighted but not averaged.
    """

    def __init__(self, weight=None, batch_axis=0, margin=0, **kwargs):
        super().__init__(weight, batch_axis, **kwargs)
        self._margin = margin

    def forward(self, input1, input2, label, *args):
        if isinstance(input1, NDArray) and isinstance(input2, NDArray):
            if input1.size != input2.size:
                raise ShapeError(f"CosineEmbeddingLoss: input1 of shape {input1.shape} cannot "
                                 f"be reshaped to input2's shape {input2.shape}; help: give "
                                 "two embeddings of the same size per sample")
            if isinstance(label, NDArray) and label.size * input2.shape[-1] != input2.size:
                raise ShapeError(f"CosineEmbeddingLoss: label of shape {label.shape} does not "
                                 f"give one label per pair of embeddings of shape "
                                 f"{input2.shape}; help: one 1 or -1 per sample")
        return HybridBlock.forward(self, input1, input2, label, *args)

    def hybrid_forward(self, F, input1, input2, label, sample_weight=None):
        input1 = F.reshape_like(input1, input2)
        dot = F.sum(input1 * input2, axis=-1)
        norms = F.norm(input1, axis=-1) * F.norm(input2, axis=-1)
        cos = dot / F.maximum(norms, 1e-12)
        label = F.reshape_like(label, cos)
        loss = (label == 1) * (1 - cos) + (label == -1) * F.relu(cos - self._margin)
        # MXNet keeps a column per pair: (N, 1) for (N, D) inputs, every pair a row for more
        return _apply_weighting(F, loss.reshape((-1, 1)), self._weight, sample_weight)


class PoissonNLLLoss(Loss):
    """Negative log-likelihood of targets under Poisson distributions, averaged over every
    element (one number, as MXNet's PoissonNLLLoss gives).

    from_logits=True (pred is the log of the rate): exp(pred) - target * pred; else (pred
    is the rate): pred - target * log(pred + epsilon). compute_full=True adds the Stirling
    term target * log(target) - target + 0.5 * log(2 * pi * target) where target > 1.

    Inputs:
        - **pred**: (N, ...).
        - **target**: same number of elements as pred.
        - **sample_weight**: broadcastable to pred's shape, or None.
    Outputs:
        - **loss**: shape (1,), the mean over all elements.
    """

    _label_like_pred = True

    def __init__(self, weight=None, from_logits=True, batch_axis=0, compute_full=False,
                 **kwargs):
        super().__init__(weight, batch_axis, **kwargs)
        self._from_logits = from_logits
        self._compute_full = compute_full

    def hybrid_forward(self, F, pred, target, sample_weight=None, epsilon=1e-08):
        target = self._reshape_like_pred(F, target, pred)
        if self._from_logits:
            loss = F.exp(pred) - target * pred
        else:
            loss = pred - target * F.log(pred + epsilon)
        if self._compute_full:
            # log of max(target, 1): where target <= 1 the term is dropped, and 0 * log(0)
            # must not make it NaN
            big = target > 1
            safe = F.maximum(target, 1)
            stirling = safe * F.log(safe) - safe + 0.5 * F.log(2 * 3.141592653589793 * safe)
            loss = loss + big * stirling
        loss = _apply_weighting(F, loss, self._weight, sample_weight)
        return F.mean(loss)


class SDMLLoss(Loss):
    """Smoothed Deep Metric Learning loss (Bonadiman et al. 2019) of two aligned batches:
    x2[i] is the positive sample of x1[i] and every other row of x2 a negative one.

    With d[i, j] = ||x1[i] - x2[j]||^2, p = softmax(-d) along j and the smoothed targets
    t = (1 - s) on the diagonal and s / (N - 1) elsewhere (s = smoothing_parameter), the
    loss of sample i is mean_j t[i, j] * (log t[i, j] - log p[i, j]), times `weight`
    (MXNet 1.9.1 ignores `weight` here; with its default 1 both agree).

    Parameters
    ----------
    smoothing_parameter : float
        Target probability mass spread over the negatives, in [0, 1).
    weight : float or None
        Global scale of the loss.

    Inputs:
        - **x1**: (N, D), N >= 2.
        - **x2**: (N, D), aligned with x1.
    Outputs:
        - **loss**: (N,).
    """

    def __init__(self, smoothing_parameter=0.3, weight=1., batch_axis=0, **kwargs):
        super().__init__(weight, batch_axis, **kwargs)
        if not 0 <= smoothing_parameter < 1:
            raise MXNetError(f"SDMLLoss: smoothing_parameter must be in [0, 1), got "
                             f"{smoothing_parameter!r}")
        self.smoothing_parameter = smoothing_parameter

    def forward(self, x1, x2):
        if isinstance(x1, NDArray):
            if x1.shape != x2.shape or x1.ndim != 2 or x1.shape[0] < 2:
                raise ShapeError(f"SDMLLoss: x1 and x2 must both be (N, D) with N >= 2, got "
                                 f"{x1.shape} and {x2.shape}; help: pass aligned batches of "
                                 f"at least two embeddings")
        return HybridBlock.forward(self, x1, x2)

    def _targets(self, F, batch_size, dtype):
        gold = F.eye(batch_size, dtype=dtype)
        spread = self.smoothing_parameter / (batch_size - 1)
        return gold * (1 - self.smoothing_parameter) + (1 - gold) * spread

    def hybrid_forward(self, F, x1, x2):
        diff = F.broadcast_sub(F.expand_dims(x1, axis=1), F.expand_dims(x2, axis=0))
        log_p = F.log_softmax(-F.sum(F.square(diff), axis=2), axis=1)
        targets = self._targets(F, x1.shape[0], x1.dtype).as_in_context(log_p.context)
        loss = targets * (F.log(targets + 1e-12) - log_p)
        return self._mean(F, loss, None)


class CTCLoss(Loss):
    """Connectionist temporal classification loss: -log p(label | pred), summed over every
    alignment of the label to the prediction's time steps. The blank is the last class;
    labels use classes 0 .. C-2 and are padded with -1 (or cut by label_lengths).

    Parameters
    ----------
    layout : 'NTC' (default) or 'TNC'
        Layout of pred.
    label_layout : 'NT' (default) or 'TN'
        Layout of label.
    weight : float or None

    Inputs:
        - **pred**: unnormalized scores (N, T, C) for 'NTC'.
        - **label**: (N, L) for 'NT', class indices padded with -1.
        - **pred_lengths**: (N,) valid time steps per sample, or None for all T.
        - **label_lengths**: (N,) label lengths, or None to stop at the first -1.
        - **sample_weight**: broadcastable to (N,), or None.
    Outputs:
        - **loss**: (N,).
    """

    def __init__(self, layout="NTC", label_layout="NT", weight=None, **kwargs):
        if layout not in ("NTC", "TNC") or label_layout not in ("NT", "TN"):
            raise MXNetError(f"CTCLoss: layout must be 'NTC' or 'TNC' and label_layout 'NT' or "
                             f"'TN', got {layout!r} and {label_layout!r}")
        super().__init__(weight, label_layout.find("N"), **kwargs)
        self._layout = layout

    def forward(self, pred, label, pred_lengths=None, label_lengths=None, sample_weight=None):
        return HybridBlock.forward(self, pred, label, pred_lengths, label_lengths,
                                   sample_weight)

    def hybrid_forward(self, F, pred, label, pred_lengths=None, label_lengths=None,
                       sample_weight=None):
        if self._layout == "NTC":
            pred = F.swapaxes(pred, 0, 1)
        if self._batch_axis == 1:
            label = F.swapaxes(label, 0, 1)
        loss = F.CTCLoss(pred, label, pred_lengths, label_lengths,
                         use_data_lengths=pred_lengths is not None,
                         use_label_lengths=label_lengths is not None, blank_label="last")
        return _apply_weighting(F, loss, self._weight, sample_weight)
