"""Evaluation metrics (`mx.metric`): scores accumulated over batches, with MXNet 1.x names.

A metric keeps `sum_metric` / `num_inst` since the last `reset_local()` and
`global_sum_metric` / `global_num_inst` since the last `reset()`; `get()` and
`get_global()` report the ratio. `update(labels, preds)` takes NDArrays or NumPy arrays,
alone or in lists (one prediction per label); the arithmetic runs in NumPy on the host.

Out of scope: MXNet's Torch/Caffe wrappers.
"""
import json
import math
from collections import OrderedDict

import numpy

from .base import NameRegistry, ShapeError
from .ndarray import NDArray

_NAMES = NameRegistry("metric")
register = _NAMES.register
alias = _NAMES.alias




def create(metric, *args, **kwargs):
    """A metric from a name (case-insensitive), an instance, a class, a list of those
    (giving a CompositeEvalMetric) or a function `feval(label, pred)` (a CustomMetric).

    >>> mx.metric.create('acc')
    >>> mx.metric.create(['acc', 'ce'])
    """
    if isinstance(metric, EvalMetric):
        return metric
    if isinstance(metric, type) and issubclass(metric, EvalMetric):
        return metric(*args, **kwargs)
    if isinstance(metric, (list, tuple)):
        return CompositeEvalMetric([create(m, *args, **kwargs) for m in metric])
    if callable(metric):
        return CustomMetric(metric, *args, **kwargs)
    if isinstance(metric, dict):
        return _from_config(metric, *args, **kwargs)
    if not isinstance(metric, str):
        raise TypeError(f"a metric must be a name, a config dict or its JSON, an EvalMetric, "
                        f"a list or a function, got {type(metric).__name__}")
    if metric.lstrip().startswith(("{", "[")):
        return create(_parse_json(metric), *args, **kwargs)
    return _NAMES.lookup(metric)(*args, **kwargs)


def _parse_json(text):
    try:
        return json.loads(text)
    except ValueError as err:
        raise ValueError(f"metric config {text!r} is not valid JSON ({err}); pass a metric "
                         f"name or the JSON of a metric's get_config()") from None


def _from_config(config, *args, **kwargs):
    """A metric from a `get_config()` dict: its 'metric' key names the class."""
    config = dict(config)
    if "metric" not in config:
        raise ValueError(f"metric config {config!r} has no 'metric' key naming the metric "
                         f"class; pass what get_config() returns")
    name = config.pop("metric")
    config.update(kwargs)
    return _NAMES.lookup(name)(*args, **config)


def _as_list(x):
    return [x] if isinstance(x, (NDArray, numpy.ndarray)) else list(x)


def _to_numpy(x):
    if isinstance(x, NDArray):
        return x.asnumpy()
    return x.get() if hasattr(x, "__cuda_array_interface__") else numpy.asarray(x)


def check_label_shapes(labels, preds, wrap=False, shape=False, name="metric"):
    """Check there are as many labels as predictions (or, with `shape`, equal shapes).

    With `wrap`, a single array becomes a one-element list; returns (labels, preds).
    """
    if shape:
        got_label, got_pred = tuple(labels.shape), tuple(preds.shape)
        what = "label shape {} does not match prediction shape {}"
    else:
        if wrap:
            labels, preds = _as_list(labels), _as_list(preds)
        got_label, got_pred = len(labels), len(preds)
        what = "got {} labels but {} predictions; pass one prediction per label"
    if got_label != got_pred:
        raise ShapeError(f"{name}: " + what.format(got_label, got_pred))
    return labels, preds


class EvalMetric:
    """Base class: subclasses implement `update(labels, preds)`.

    A subclass that counts with `_add(total, count)` feeds the global statistics too and
    should pass `has_global_stats=True`; otherwise `get_global()` is `get()`, as in MXNet.
    """

    def __init__(self, name, output_names=None, label_names=None, **kwargs):
        self.name = str(name)
        self.output_names = output_names
        self.label_names = label_names
        self._has_global_stats = kwargs.pop("has_global_stats", False)
        self._kwargs = kwargs
        self.reset()

    def __str__(self):
        return f"EvalMetric: {dict(self.get_name_value())}"

    def get_config(self):
        """The arguments that recreate this metric with `create(**config)`-style calls."""
        config = dict(self._kwargs)
        config.update(metric=type(self).__name__, name=self.name,
                      output_names=self.output_names, label_names=self.label_names)
        return config

    def update_dict(self, label, pred):
        """Update from dicts of named arrays, keeping `label_names` / `output_names`."""
        preds = [pred[n] for n in self.output_names] if self.output_names is not None \
            else list(pred.values())
        labels = [label[n] for n in self.label_names] if self.label_names is not None \
            else list(label.values())
        self.update(labels, preds)

    def update(self, labels, preds):
        """Add a batch of labels and predictions."""
        raise NotImplementedError(f"{type(self).__name__} must implement update")

    def reset(self):
        """Clear the local and the global statistics."""
        self.reset_local()
        self.global_num_inst = 0
        self.global_sum_metric = 0.0

    def reset_local(self):
        """Clear the statistics since the last reset_local, keeping the global ones."""
        self.num_inst = 0
        self.sum_metric = 0.0

    def get(self):
        """(name, value) since the last reset_local; value is nan before any update."""
        return self.name, self._ratio(self.sum_metric, self.num_inst)

    def get_global(self):
        """(name, value) since the last reset."""
        if not self._has_global_stats:
            return self.get()
        return self.name, self._ratio(self.global_sum_metric, self.global_num_inst)

    def get_name_value(self):
        """[(name, value), ...] from `get()`."""
        return _zip_name_value(*self.get())

    def get_global_name_value(self):
        """[(name, value), ...] from `get_global()`."""
        return _zip_name_value(*self.get_global())

    def _ratio(self, total, count):
        return float("nan") if count == 0 else total / count

    def _add(self, total, count):
        self.sum_metric += total
        self.num_inst += count
        self.global_sum_metric += total
        self.global_num_inst += count

    def _pairs(self, labels, preds):
        """(label, pred) NumPy pairs, after checking there is one prediction per label."""
        labels, preds = check_label_shapes(labels, preds, wrap=True, name=self.name)
        return [(_to_numpy(lab), _to_numpy(pred)) for lab, pred in zip(labels, preds)]

    def _check_shape(self, label, pred):
        check_label_shapes(label, pred, shape=True, name=self.name)

    def _check_count(self, label, pred):
        if label.shape[0] != pred.shape[0]:
            raise ShapeError(f"{self.name}: {label.shape[0]} labels (shape {label.shape}) but "
                             f"{pred.shape[0]} predictions (shape {pred.shape})")


def _zip_name_value(name, value):
    names = name if isinstance(name, list) else [name]
    values = value if isinstance(value, list) else [value]
    return list(zip(names, values))


@register
class CompositeEvalMetric(EvalMetric):
    """Several metrics updated together; `get()` returns ([names], [values])."""

    def __init__(self, metrics=None, name="composite", output_names=None, label_names=None):
        self.metrics = [create(m) for m in (metrics or [])]
        super().__init__(name, output_names=output_names, label_names=label_names,
                         has_global_stats=True)

    def add(self, metric):
        """Append a metric (anything `create` accepts)."""
        self.metrics.append(create(metric))

    def get_metric(self, index):
        """The child metric at `index`."""
        if not -len(self.metrics) <= index < len(self.metrics):
            raise ValueError(f"metric index {index} is out of range: this composite has "
                             f"{len(self.metrics)} metrics")
        return self.metrics[index]

    def update_dict(self, labels, preds):
        if self.label_names is not None:
            labels = OrderedDict((k, v) for k, v in labels.items() if k in self.label_names)
        if self.output_names is not None:
            preds = OrderedDict((k, v) for k, v in preds.items() if k in self.output_names)
        for metric in self.metrics:
            metric.update_dict(labels, preds)

    def update(self, labels, preds):
        for metric in self.metrics:
            metric.update(labels, preds)

    def reset(self):
        for metric in self.metrics:
            metric.reset()

    def reset_local(self):
        for metric in self.metrics:
            metric.reset_local()

    def get(self):
        return self._collect(lambda m: m.get())

    def get_global(self):
        return self._collect(lambda m: m.get_global())

    def _collect(self, get):
        names, values = [], []
        for metric in self.metrics:
            name, value = get(metric)
            names.extend(name if isinstance(name, list) else [name])
            values.extend(value if isinstance(value, list) else [value])
        return names, values

    def get_config(self):
        config = super().get_config()
        config["metrics"] = [m.get_config() for m in self.metrics]
        return config


@register
@alias("acc")
class Accuracy(EvalMetric):
    """Fraction of correct predictions. Predictions with a class axis (`axis`, default 1)
    are reduced by argmax; otherwise they are compared to the labels as they are."""

    def __init__(self, axis=1, name="accuracy", output_names=None, label_names=None):
        super().__init__(name, axis=axis, output_names=output_names, label_names=label_names,
                         has_global_stats=True)
        self.axis = axis

    def update(self, labels, preds):
        for label, pred in self._pairs(labels, preds):
            if pred.shape != label.shape:
                pred = numpy.argmax(pred, axis=self.axis)
            label, pred = label.astype("int64").ravel(), pred.astype("int64").ravel()
            self._check_shape(label, pred)
            self._add(int((label == pred).sum()), label.size)


@register
@alias("top_k_accuracy", "top_k_acc")
class TopKAccuracy(EvalMetric):
    """Fraction of samples whose label is among the `top_k` highest-scored classes."""

    def __init__(self, top_k=1, name="top_k_accuracy", output_names=None, label_names=None):
        if top_k <= 1:
            raise ValueError(f"TopKAccuracy needs top_k > 1, got {top_k}; "
                             "help: use Accuracy for top_k=1")
        super().__init__(name, top_k=top_k, output_names=output_names,
                         label_names=label_names, has_global_stats=True)
        self.top_k = top_k
        self.name += f"_{top_k}"

    def update(self, labels, preds):
        for label, pred in self._pairs(labels, preds):
            if pred.ndim > 2:
                raise ShapeError(f"{self.name}: predictions must have at most 2 dimensions "
                                 f"(batch, classes), got shape {pred.shape}")
            label = label.astype("int64").ravel()
            self._check_count(label, pred)
            if pred.ndim == 1:
                hits = (pred.astype("int64") == label).sum()
            else:
                k = min(self.top_k, pred.shape[1])
                top = numpy.argpartition(pred.astype("float32"), -k, axis=1)[:, -k:]
                hits = (top == label[:, None]).any(axis=1).sum()
            self._add(int(hits), pred.shape[0])


class _BinaryCounts:
    """Confusion counts of a binary classifier."""

    def __init__(self):
        self.tp = self.fp = self.fn = self.tn = 0

    def add(self, label, pred_label):
        self.tp += int(((pred_label == 1) & (label == 1)).sum())
        self.fp += int(((pred_label == 1) & (label != 1)).sum())
        self.fn += int(((pred_label != 1) & (label == 1)).sum())
        self.tn += int(((pred_label != 1) & (label != 1)).sum())

    @property
    def total(self):
        return self.tp + self.fp + self.fn + self.tn

    @property
    def fscore(self):
        precision = self.tp / (self.tp + self.fp) if self.tp + self.fp else 0.0
        recall = self.tp / (self.tp + self.fn) if self.tp + self.fn else 0.0
        return 2 * precision * recall / (precision + recall) if precision + recall else 0.0

    @property
    def matthewscc(self):
        """Matthews correlation coefficient; 0 when a margin of the table is empty."""
        denominator = ((self.tp + self.fp) * (self.tp + self.fn) * (self.tn + self.fp)
                       * (self.tn + self.fn))
        if not denominator:
            return 0.0
        return (self.tp * self.tn - self.fp * self.fn) / math.sqrt(denominator)


class _BinaryMetric(EvalMetric):
    """A score of the binary confusion counts; predictions are (batch, 2) class scores.

    average='macro' averages the score of each `update` call; 'micro' computes one score
    from the counts of all updates (num_inst then counts samples).
    """
    _score = None  # the _BinaryCounts property a subclass reports

    def __init__(self, name, output_names=None, label_names=None, average="macro"):
        if average not in ("macro", "micro"):
            raise ValueError(f"{type(self).__name__} average must be 'macro' or 'micro', "
                             f"got {average!r}")
        self.average = average
        self._local, self._global = _BinaryCounts(), _BinaryCounts()
        super().__init__(name, average=average, output_names=output_names, has_global_stats=True,
                         label_names=label_names)

    def update(self, labels, preds):
        batch = _BinaryCounts()
        for label, pred in self._pairs(labels, preds):
            if pred.ndim != 2:
                raise ShapeError(f"{self.name}: predictions must be (batch, 2) class scores, "
                                 f"got shape {pred.shape}")
            label = label.astype("int64").ravel()
            self._check_count(label, pred)
            classes = numpy.unique(label)
            if len(classes) > 2:
                raise ValueError(f"{self.name} supports binary classification only; the "
                                 f"labels hold the classes {classes.tolist()}")
            for counts in (batch, self._local, self._global):
                counts.add(label, numpy.argmax(pred, axis=1))
        if self.average == "macro":
            self._add(getattr(batch, self._score), 1)
        else:
            self.sum_metric = getattr(self._local, self._score) * self._local.total
            self.num_inst = self._local.total
            self.global_sum_metric = getattr(self._global, self._score) * self._global.total
            self.global_num_inst = self._global.total

    def reset(self):
        self._global = _BinaryCounts()
        super().reset()

    def reset_local(self):
        self._local = _BinaryCounts()
        super().reset_local()


@register
class MCC(_BinaryMetric):
    """Matthews correlation coefficient of a binary classifier, (tp*tn - fp*fn) /
    sqrt((tp+fp)(tp+fn)(tn+fp)(tn+fn)), 0 when a margin is empty; predictions are (batch, 2)
    class scores. `average` as in F1.

    >>> m = mx.metric.MCC(average='micro')
    >>> m.update([mx.nd.array([1, 0])], [mx.nd.array([[0.1, 0.9], [0.8, 0.2]])])
    >>> m.get()
    ('mcc', 1.0)
    """
    _score = "matthewscc"

    def __init__(self, name="mcc", output_names=None, label_names=None, average="macro"):
        super().__init__(name, output_names, label_names, average)


@register
class F1(_BinaryMetric):
    """Binary F1 score of the positive class (label 1); predictions are (batch, 2) scores.

    average='macro' averages the F1 of each `update` call; 'micro' computes one F1 from
    the confusion counts of all updates.
    """
    _score = "fscore"

    def __init__(self, name="f1", output_names=None, label_names=None, average="macro"):
        super().__init__(name, output_names, label_names, average)


@register
class PCC(EvalMetric):
    """Multiclass Matthews correlation (Gorodkin's R_K) of the confusion matrix of all
    updates: (c*s - sum p_k t_k) / sqrt((s^2 - sum p_k^2) (s^2 - sum t_k^2)) with c correct,
    s samples, p_k predicted and t_k true counts of class k. Predictions are class scores
    (argmax over axis 1) or class indices; equals MCC for two classes.

    >>> m = mx.metric.PCC()
    >>> m.update([mx.nd.array([0, 1, 2])], [mx.nd.array([0, 1, 1])])
    """

    def __init__(self, name="pcc", output_names=None, label_names=None):
        self._local = self._global = None
        super().__init__(name, output_names=output_names, label_names=label_names,
                         has_global_stats=True)

    def update(self, labels, preds):
        for label, pred in self._pairs(labels, preds):
            label = label.astype("int64").ravel()
            pred = numpy.argmax(pred, axis=1) if pred.ndim == 2 else pred.ravel()
            self._check_count(label, pred)
            pred = pred.astype("int64")
            if label.size and min(label.min(), pred.min()) < 0:
                raise ValueError(f"{self.name}: classes must be non-negative indices, got "
                                 f"labels {numpy.unique(label).tolist()} and predictions "
                                 f"{numpy.unique(pred).tolist()}")
            self._local = _count_into(self._local, label, pred)
            self._global = _count_into(self._global, label, pred)
        self.num_inst, self.global_num_inst = int(self._local.sum()), int(self._global.sum())
        self.sum_metric = _gorodkin(self._local) * self.num_inst
        self.global_sum_metric = _gorodkin(self._global) * self.global_num_inst

    def reset(self):
        self._global = numpy.zeros((0, 0), dtype="int64")
        super().reset()

    def reset_local(self):
        self._local = numpy.zeros((0, 0), dtype="int64")
        super().reset_local()


def _count_into(matrix, label, pred):
    """`matrix` (true class x predicted class), grown to fit, plus this batch's counts."""
    size = max(matrix.shape[0], int(label.max(initial=-1)) + 1, int(pred.max(initial=-1)) + 1)
    grown = numpy.zeros((size, size), dtype="int64")
    grown[:matrix.shape[0], :matrix.shape[1]] = matrix
    numpy.add.at(grown, (label, pred), 1)
    return grown


def _gorodkin(matrix):
    samples, correct = matrix.sum(), numpy.trace(matrix)
    true, predicted = matrix.sum(axis=1), matrix.sum(axis=0)
    denominator = (samples ** 2 - (predicted ** 2).sum()) * (samples ** 2 - (true ** 2).sum())
    if not denominator:
        return 0.0
    return float((correct * samples - (predicted * true).sum()) / math.sqrt(denominator))


@register
class Perplexity(EvalMetric):
    """exp of the mean negative log-probability of the labels; labels equal to
    `ignore_label` are left out. `axis` is the class axis of the predictions."""

    def __init__(self, ignore_label=None, axis=-1, name="perplexity", output_names=None,
                 label_names=None):
        super().__init__(name, ignore_label=ignore_label, axis=axis, has_global_stats=True,
                         output_names=output_names, label_names=label_names)
        self.ignore_label = ignore_label
        self.axis = axis

    def update(self, labels, preds):
        for label, pred in self._pairs(labels, preds):
            classes = pred.shape[self.axis]
            if label.size * classes != pred.size:
                raise ShapeError(f"{self.name}: labels of shape {label.shape} do not fit "
                                 f"predictions of shape {pred.shape} (class axis {self.axis})")
            label = label.ravel().astype("int64")
            probs = numpy.moveaxis(pred, self.axis, -1).reshape(-1, classes)
            picked = probs[numpy.arange(label.size), label].astype("float64")
            keep = numpy.ones(label.size, bool) if self.ignore_label is None \
                else label != self.ignore_label
            loss = -numpy.log(numpy.maximum(1e-10, picked[keep])).sum()
            self._add(float(loss), int(keep.sum()))

    def _ratio(self, total, count):
        return float("nan") if count == 0 else math.exp(total / count)


def _regression_pair(metric, label, pred):
    """Label and prediction as matching shapes: vectors become columns."""
    label = label.reshape(-1, 1) if label.ndim == 1 else label
    pred = pred.reshape(-1, 1) if pred.ndim == 1 else pred
    if pred.shape != label.shape and pred.size == label.size:
        pred = pred.reshape(label.shape)
    metric._check_shape(label, pred)
    return label.astype("float64"), pred.astype("float64")


@register
class MAE(EvalMetric):
    """Mean absolute error, averaged per batch and then over batches."""

    def __init__(self, name="mae", output_names=None, label_names=None):
        super().__init__(name, output_names=output_names, label_names=label_names,
                         has_global_stats=True)

    def update(self, labels, preds):
        for label, pred in self._pairs(labels, preds):
            label, pred = _regression_pair(self, label, pred)
            self._add(float(self._batch_error(label - pred)), 1)

    @staticmethod
    def _batch_error(diff):
        return numpy.abs(diff).mean()


@register
class MSE(MAE):
    """Mean squared error, averaged per batch and then over batches."""

    def __init__(self, name="mse", output_names=None, label_names=None):
        super().__init__(name, output_names=output_names, label_names=label_names)

    @staticmethod
    def _batch_error(diff):
        return (diff ** 2).mean()


@register
class RMSE(MAE):
    """Root mean squared error of each batch, averaged over batches."""

    def __init__(self, name="rmse", output_names=None, label_names=None):
        super().__init__(name, output_names=output_names, label_names=label_names)

    @staticmethod
    def _batch_error(diff):
        return numpy.sqrt((diff ** 2).mean())


@register
@alias("ce")
class CrossEntropy(EvalMetric):
    """Mean of -log(p[label] + eps) over samples; predictions are (batch, classes)
    probabilities, labels class indices."""

    def __init__(self, eps=1e-12, name="cross-entropy", output_names=None, label_names=None):
        super().__init__(name, eps=eps, output_names=output_names, label_names=label_names,
                         has_global_stats=True)
        self.eps = eps

    def update(self, labels, preds):
        for label, pred in self._pairs(labels, preds):
            label = label.ravel()
            self._check_count(label, pred)
            prob = pred[numpy.arange(label.shape[0]), label.astype("int64")]
            self._add(float((-numpy.log(prob.astype("float64") + self.eps)).sum()),
                      label.shape[0])


@register
@alias("nll_loss")
class NegativeLogLikelihood(CrossEntropy):
    """Mean negative log-likelihood of the labels (the same formula as CrossEntropy)."""

    def __init__(self, eps=1e-12, name="nll-loss", output_names=None, label_names=None):
        super().__init__(eps, name, output_names=output_names, label_names=label_names)


@register
@alias("pearsonr")
class PearsonCorrelation(EvalMetric):
    """Pearson correlation of predictions and labels: averaged over updates ('macro') or
    computed over all samples seen ('micro')."""

    def __init__(self, name="pearsonr", output_names=None, label_names=None, average="macro"):
        if average not in ("macro", "micro"):
            raise ValueError(f"PearsonCorrelation average must be 'macro' or 'micro', "
                             f"got {average!r}")
        self.average = average
        self._local = self._global = None
        super().__init__(name, average=average, output_names=output_names, has_global_stats=True,
                         label_names=label_names)

    def update(self, labels, preds):
        for label, pred in self._pairs(labels, preds):
            label, pred = _regression_pair(self, label, pred)
            x, y = pred.ravel(), label.ravel()
            if self.average == "macro":
                self._add(float(numpy.corrcoef(x, y)[0, 1]), 1)
                continue
            moments = numpy.array([x.size, x.sum(), y.sum(), (x * x).sum(), (y * y).sum(),
                                   (x * y).sum()])
            self._local += moments
            self._global += moments

    def get(self):
        if self.average == "macro":
            return super().get()
        return self.name, _pearson(self._local)

    def get_global(self):
        if self.average == "macro":
            return super().get_global()
        return self.name, _pearson(self._global)

    def reset(self):
        self._global = numpy.zeros(6)
        super().reset()

    def reset_local(self):
        self._local = numpy.zeros(6)
        super().reset_local()


def _pearson(moments):
    n, sx, sy, sxx, syy, sxy = moments
    if n == 0:
        return float("nan")
    cov = n * sxy - sx * sy
    return float(cov / math.sqrt((n * sxx - sx * sx) * (n * syy - sy * sy)))


@register
class Loss(EvalMetric):
    """Mean of the given loss values; labels are ignored."""

    def __init__(self, name="loss", output_names=None, label_names=None):
        super().__init__(name, output_names=output_names, label_names=label_names,
                         has_global_stats=True)

    def update(self, _, preds):
        for pred in _as_list(preds):
            pred = _to_numpy(pred)
            self._add(float(pred.sum()), pred.size)


@register
class CustomMetric(EvalMetric):
    """A metric from `feval(label, pred)` on NumPy arrays, returning a value (averaged
    over calls) or a (sum, count) pair.

    >>> mx.metric.CustomMetric(lambda label, pred: abs(label - pred).max(), name='maxerr')
    """

    def __init__(self, feval, name=None, allow_extra_outputs=False, output_names=None,
                 label_names=None):
        if name is None:
            name = feval.__name__
            if "<" in name:
                name = f"custom({name})"
        super().__init__(name, feval=feval, allow_extra_outputs=allow_extra_outputs,
                         has_global_stats=True,
                         output_names=output_names, label_names=label_names)
        self._feval = feval
        self._allow_extra_outputs = allow_extra_outputs

    def update(self, labels, preds):
        if self._allow_extra_outputs:
            pairs = [(_to_numpy(lab), _to_numpy(p))
                     for lab, p in zip(_as_list(labels), _as_list(preds))]
        else:
            pairs = self._pairs(labels, preds)
        for label, pred in pairs:
            result = self._feval(label, pred)
            if isinstance(result, tuple):
                self._add(result[0], result[1])
            else:
                self._add(result, 1)

    def get_config(self):
        raise NotImplementedError("CustomMetric cannot be serialized: it wraps a function")


def np(numpy_feval, name=None, allow_extra_outputs=False):
    """A CustomMetric from a function of NumPy (label, pred), named after the function.

    >>> mse = mx.metric.np(lambda label, pred: ((label - pred) ** 2).mean(), name='mse')
    """
    def feval(label, pred):
        return numpy_feval(label, pred)
    feval.__name__ = numpy_feval.__name__
    return CustomMetric(feval, name, allow_extra_outputs)


__all__ = ["EvalMetric", "CompositeEvalMetric", "Accuracy", "TopKAccuracy", "F1", "Perplexity",
           "MCC", "PCC", "MAE", "MSE", "RMSE", "CrossEntropy", "NegativeLogLikelihood", "PearsonCorrelation",
           "Loss", "CustomMetric", "create", "np", "register", "alias", "check_label_shapes"]
