"""Checks the estimator and its handlers share: metric lists, metric references, and the
comparison that decides whether a monitored value improved."""
import numpy as np

from ....metric import Accuracy, CompositeEvalMetric, EvalMetric
from ...loss import SoftmaxCrossEntropyLoss


def check_metrics(metrics):
    """A flat list of EvalMetrics from one metric, a composite, a list or None."""
    if isinstance(metrics, CompositeEvalMetric):
        return [m for inner in metrics.metrics for m in check_metrics(inner)]
    if isinstance(metrics, EvalMetric):
        return [metrics]
    metrics = list(metrics or [])
    bad = [m for m in metrics if not isinstance(m, EvalMetric)]
    if bad:
        raise ValueError(f"metrics must be an EvalMetric or a list of them, got {bad!r} in "
                         f"{metrics!r}; help: pass e.g. mx.metric.Accuracy()")
    return metrics


def check_handler_metric_ref(handler, known_metrics):
    """A handler that mixes with the default handlers must watch the estimator's own metric
    objects: the defaults update and reset only those."""
    for attribute in dir(handler):
        if "metric" not in attribute and "monitor" not in attribute:
            continue
        reference = getattr(handler, attribute)
        refs = reference if isinstance(reference, list) else [reference]
        for metric in refs:
            if isinstance(metric, EvalMetric) and metric not in known_metrics:
                raise ValueError(
                    f"{type(handler).__name__}.{attribute} refers to metric {metric.name!r}, "
                    "which is not one of the estimator's metrics, so nothing updates it; "
                    "help: use objects from estimator.train_metrics and estimator.val_metrics")


def suggest_metric_for_loss(loss):
    """The metric MXNet adds by default for a loss, or None."""
    return Accuracy() if isinstance(loss, SoftmaxCrossEntropyLoss) else None


def improvement_op(monitor, mode, who):
    """np.greater or np.less: how `who` compares the monitored metric's values.

    'auto' picks greater for accuracies and F1 scores (higher is better), less otherwise.
    """
    if mode == "max":
        return np.greater
    if mode == "min":
        return np.less
    if mode != "auto":
        raise ValueError(f"{who}: mode must be 'auto', 'min' or 'max', got {mode!r}")
    name = monitor.get()[0].lower()
    return np.greater if ("acc" in name or "f1" in name) else np.less


def check_monitor(monitor, who):
    """A monitored value must come from one plain metric."""
    if not isinstance(monitor, EvalMetric):
        raise ValueError(f"{who}: monitor must be an EvalMetric, got {monitor!r}; help: pass "
                         "one of estimator.train_metrics or estimator.val_metrics")
    if isinstance(monitor, CompositeEvalMetric):
        raise ValueError(f"{who}: monitor {monitor.name!r} is a CompositeEvalMetric, whose "
                         "value is a list; help: monitor one of its metrics instead")
    return monitor
