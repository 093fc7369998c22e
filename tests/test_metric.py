"""Metrics against hand-computed values, over one and several batches, plus composites,
custom metrics, creation by name and the shape-mismatch errors."""
import json
import math

import numpy as np
import pytest

import minigluon as mx
from minigluon import nd
from minigluon.base import ShapeError, UnknownNameError

PROBS = nd.array([[0.7, 0.2, 0.1], [0.1, 0.3, 0.6], [0.2, 0.5, 0.3], [0.4, 0.4, 0.2]])
LABELS = nd.array([0, 2, 0, 1])


def test_accuracy_single_and_multi_batch():
    acc = mx.metric.Accuracy()
    acc.update([LABELS], [PROBS])              # argmax: 0, 2, 1, 0 -> 2 of 4 correct
    assert acc.get() == ("accuracy", 0.5)
    acc.update(nd.array([1, 1]), nd.array([[0, 1], [1, 0]]))   # 1 of 2 more
    assert acc.num_inst == 6 and acc.sum_metric == 3
    assert acc.get()[1] == pytest.approx(0.5)


def test_accuracy_with_class_labels_numpy_inputs_and_axis():
    acc = mx.metric.Accuracy()
    acc.update(np.array([1, 2, 3]), np.array([1, 0, 3]))
    assert acc.get()[1] == pytest.approx(2 / 3)
    acc = mx.metric.Accuracy(axis=0)
    acc.update([nd.array([1, 0])], [nd.array([[0.1, 0.9], [0.8, 0.2]])])  # argmax axis 0: 1, 0
    assert acc.get()[1] == 1.0


def test_nan_before_any_update_and_reset():
    acc = mx.metric.Accuracy()
    assert math.isnan(acc.get()[1])
    acc.update([LABELS], [PROBS])
    acc.reset()
    assert acc.num_inst == 0 and math.isnan(acc.get()[1])


def test_local_and_global_statistics():
    acc = mx.metric.Accuracy()
    acc.update([nd.array([0, 1])], [nd.array([0, 1])])
    acc.reset_local()
    acc.update([nd.array([0, 1])], [nd.array([0, 0])])
    assert acc.get()[1] == 0.5
    assert acc.get_global()[1] == 0.75
    assert acc.get_global_name_value() == [("accuracy", 0.75)]


def test_user_subclass_without_global_stats_reports_local_ones():
    class Count(mx.metric.EvalMetric):
        def update(self, labels, preds):
            self.sum_metric += len(preds)
            self.num_inst += 1

    metric = Count("count")
    metric.update([], [1, 2])
    assert metric.get() == metric.get_global() == ("count", 2.0)


def test_top_k_accuracy():
    topk = mx.metric.TopKAccuracy(top_k=2)
    topk.update([LABELS], [PROBS])   # top-2 sets {0,1}, {2,1}, {1,2}, {0,1} -> 3 of 4
    assert topk.get() == ("top_k_accuracy_2", 0.75)
    topk.update([nd.array([2])], [nd.array([[0.5, 0.3, 0.2]])])
    assert topk.get()[1] == pytest.approx(3 / 5)
    with pytest.raises(ValueError, match="use Accuracy"):
        mx.metric.TopKAccuracy(top_k=1)


def test_cross_entropy_and_nll():
    expected = -np.mean(np.log([0.7, 0.6, 0.2, 0.4]))
    for metric, name in [(mx.metric.CrossEntropy(), "cross-entropy"),
                         (mx.metric.NegativeLogLikelihood(), "nll-loss")]:
        metric.update([LABELS], [PROBS])
        assert metric.get()[0] == name
        assert metric.get()[1] == pytest.approx(expected, rel=1e-6)


def test_perplexity_with_ignored_label():
    ppl = mx.metric.Perplexity(ignore_label=1)
    ppl.update([LABELS], [PROBS])    # label 1 (4th sample) ignored
    assert ppl.get()[1] == pytest.approx(math.exp(-np.mean(np.log([0.7, 0.6, 0.2]))), rel=1e-6)
    ppl = mx.metric.Perplexity()
    ppl.update([LABELS], [PROBS])
    assert ppl.get()[1] == pytest.approx(math.exp(-np.mean(np.log([0.7, 0.6, 0.2, 0.4]))),
                                         rel=1e-6)


def test_regression_metrics_average_per_batch():
    batches = [(np.array([1.0, 2.0, 3.0]), np.array([1.5, 2.0, 1.0])),
               (np.array([0.0, 4.0]), np.array([[1.0], [4.0]]))]
    mae, mse, rmse = mx.metric.MAE(), mx.metric.MSE(), mx.metric.RMSE()
    for label, pred in batches:
        for metric in (mae, mse, rmse):
            metric.update([nd.array(label)], [nd.array(pred)])
    diffs = [np.array([-0.5, 0.0, 2.0]), np.array([-1.0, 0.0])]
    assert mae.get() == ("mae", pytest.approx(np.mean([np.abs(d).mean() for d in diffs])))
    assert mse.get()[1] == pytest.approx(np.mean([(d ** 2).mean() for d in diffs]))
    assert rmse.get()[1] == pytest.approx(np.mean([np.sqrt((d ** 2).mean()) for d in diffs]))


def test_f1_macro_and_micro():
    # batch 1: tp=1 fp=1 fn=0 -> f1 = 2/3; batch 2: tp=1 fp=0 fn=1 -> f1 = 2/3
    batches = [(nd.array([1, 0, 0]), nd.array([[0.1, 0.9], [0.2, 0.8], [0.9, 0.1]])),
               (nd.array([1, 1, 0]), nd.array([[0.3, 0.7], [0.6, 0.4], [0.8, 0.2]]))]
    macro, micro = mx.metric.F1(), mx.metric.F1(average="micro")
    for label, pred in batches:
        macro.update([label], [pred])
        micro.update([label], [pred])
    assert macro.get() == ("f1", pytest.approx(2 / 3))
    # micro: tp=2 fp=1 fn=1 -> precision = recall = 2/3
    assert micro.get()[1] == pytest.approx(2 / 3)
    micro.update([nd.array([1, 1])], [nd.array([[0, 1], [0, 1]])])   # tp=4 fp=1 fn=1
    assert micro.get()[1] == pytest.approx(0.8)
    with pytest.raises(ValueError, match="binary"):
        macro.update([nd.array([0, 1, 2])], [nd.array(np.eye(3)[:, :2])])


def test_pearson_correlation_macro_and_micro():
    x1, y1 = np.array([1.0, 2.0, 3.0, 4.0]), np.array([1.0, 3.0, 2.0, 5.0])
    x2, y2 = np.array([0.0, 1.0, 0.5]), np.array([1.0, 0.0, 0.2])
    macro, micro = mx.metric.PearsonCorrelation(), mx.metric.create("pearsonr", average="micro")
    for x, y in [(x1, y1), (x2, y2)]:
        macro.update([nd.array(y)], [nd.array(x)])
        micro.update([nd.array(y)], [nd.array(x)])
    r = [np.corrcoef(x1, y1)[0, 1], np.corrcoef(x2, y2)[0, 1]]
    assert macro.get()[1] == pytest.approx(np.mean(r))
    whole = np.corrcoef(np.r_[x1, x2], np.r_[y1, y2])[0, 1]
    assert micro.get()[1] == pytest.approx(whole, rel=1e-5)


def test_loss_is_the_mean_of_all_values():
    loss = mx.metric.Loss()
    loss.update(None, [nd.array([1.0, 2.0]), nd.array([[3.0, 6.0]])])
    loss.update(None, nd.array([8.0]))
    assert loss.get() == ("loss", pytest.approx(4.0))


def test_composite_collects_names_and_values():
    comp = mx.metric.CompositeEvalMetric()
    comp.add("acc")
    comp.add(mx.metric.TopKAccuracy(top_k=2))
    comp.update([LABELS], [PROBS])
    assert comp.get() == (["accuracy", "top_k_accuracy_2"], [0.5, 0.75])
    assert comp.get_name_value() == [("accuracy", 0.5), ("top_k_accuracy_2", 0.75)]
    assert isinstance(comp.get_metric(1), mx.metric.TopKAccuracy)
    with pytest.raises(ValueError, match="index 5 is out of range.*2 metrics"):
        comp.get_metric(5)
    comp.reset()
    assert all(math.isnan(v) for v in comp.get()[1])


def test_update_dict_selects_names():
    acc = mx.metric.Accuracy(output_names=["softmax"], label_names=["label"])
    acc.update_dict({"label": LABELS, "other": nd.zeros(4)},
                    {"softmax": PROBS, "aux": nd.zeros((4, 3))})
    assert acc.get()[1] == 0.5
    comp = mx.metric.create(["acc"], output_names=None)
    comp.update_dict({"label": LABELS}, {"softmax": PROBS})
    assert comp.get()[1] == [0.5]


def test_custom_metric_and_np_helper():
    def max_err(label, pred):
        assert isinstance(label, np.ndarray) and isinstance(pred, np.ndarray)
        return np.abs(label - pred).max()

    metric = mx.metric.np(max_err)
    metric.update([nd.array([1, 2]), nd.array([0, 0])], [nd.array([1, 5]), nd.array([1, 0])])
    assert metric.get() == ("max_err", 2.0)          # mean of the two batch values 3 and 1
    pairs = mx.metric.CustomMetric(lambda label, pred: ((label == pred).sum(), label.size))
    pairs.update([nd.array([1, 2, 3])], [nd.array([1, 0, 3])])
    assert pairs.get()[0] == "custom(<lambda>)"
    assert pairs.get()[1] == pytest.approx(2 / 3)


def test_create_by_names_lists_and_functions():
    for name, klass in [("acc", mx.metric.Accuracy), ("Accuracy", mx.metric.Accuracy),
                        ("CE", mx.metric.CrossEntropy), ("mae", mx.metric.MAE),
                        ("mse", mx.metric.MSE), ("rmse", mx.metric.RMSE), ("f1", mx.metric.F1),
                        ("loss", mx.metric.Loss), ("nll_loss", mx.metric.NegativeLogLikelihood),
                        ("perplexity", mx.metric.Perplexity)]:
        assert type(mx.metric.create(name)) is klass, name
    topk = mx.metric.create("top_k_accuracy", top_k=3)
    assert topk.top_k == 3
    comp = mx.metric.create(["acc", mx.metric.MSE()])
    assert isinstance(comp, mx.metric.CompositeEvalMetric) and len(comp.metrics) == 2
    assert isinstance(mx.metric.create(lambda label, pred: 0.0), mx.metric.CustomMetric)
    acc = mx.metric.Accuracy()
    assert mx.metric.create(acc) is acc
    with pytest.raises(UnknownNameError, match="unknown metric 'accuracyy'.*accuracy"):
        mx.metric.create("accuracyy")


def test_mismatched_counts_and_shapes_name_the_metric():
    with pytest.raises(ShapeError, match="accuracy: got 2 labels but 1 predictions"):
        mx.metric.Accuracy().update([LABELS, LABELS], [PROBS])
    with pytest.raises(ShapeError, match=r"accuracy: label shape \(4,\) does not match "
                                         r"prediction shape \(3,\)"):
        mx.metric.Accuracy().update([LABELS], [nd.array([[1, 0], [0, 1], [1, 0]])])
    with pytest.raises(ShapeError, match=r"mse: label shape \(3, 1\) does not match "
                                         r"prediction shape \(3, 2\)"):
        mx.metric.MSE().update([nd.array([1, 2, 3])], [nd.zeros((3, 2))])
    with pytest.raises(ShapeError, match=r"cross-entropy: 4 labels .* but 3 predictions"):
        mx.metric.CrossEntropy().update([LABELS], [PROBS[:3]])


def test_str_and_get_config():
    acc = mx.metric.Accuracy(axis=1)
    acc.update([LABELS], [PROBS])
    assert str(acc) == "EvalMetric: {'accuracy': 0.5}"
    config = acc.get_config()
    assert config["metric"] == "Accuracy" and config["axis"] == 1


def _mcc_oracle(tp, fp, fn, tn):
    return (tp * tn - fp * fn) / math.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))


def test_mcc_micro_and_macro_against_the_formula():
    micro, macro = mx.metric.create("mcc", average="micro"), mx.metric.MCC()
    assert math.isnan(micro.get()[1]) and math.isnan(macro.get()[1])
    batches = [([1, 0, 1, 0], [[0.1, 0.9], [0.5, 0.5], [0.9, 0.1], [1, 0]]),
               ([0, 1], [[0.6, 0.4], [0.2, 0.8]])]
    for label, pred in batches:
        micro.update([nd.array(label)], [nd.array(pred)])
        macro.update([nd.array(label)], [nd.array(pred)])
    first, second = _mcc_oracle(1, 0, 1, 2), _mcc_oracle(1, 0, 0, 1)
    assert micro.get()[1] == pytest.approx(_mcc_oracle(2, 0, 1, 3))
    assert macro.get()[1] == pytest.approx((first + second) / 2)
    assert (micro.num_inst, macro.num_inst) == (6, 2)


def test_mcc_is_zero_when_a_margin_is_empty():
    metric = mx.metric.MCC()
    metric.update([nd.array([0, 0])], [nd.array([[0.9, 0.1], [0.8, 0.2]])])
    assert metric.get() == ("mcc", 0.0)


def test_mcc_rejects_a_bad_average_and_multiclass_labels():
    with pytest.raises(ValueError, match="'weighted'"):
        mx.metric.MCC(average="weighted")
    with pytest.raises(ValueError, match="binary"):
        mx.metric.MCC().update([nd.array([0, 1, 2])], [nd.array(np.eye(3)[:, :2])])


def _confusion_batch(matrix):
    labels, preds = [], []
    for true, row in enumerate(matrix):
        for predicted, count in enumerate(row):
            labels += [true] * count
            preds += [predicted] * count
    return nd.array(labels), nd.array(np.eye(len(matrix))[preds])


def test_pcc_matches_mcc_for_two_classes_and_accepts_class_indices():
    label, pred = _confusion_batch([[7, 3], [2, 5]])
    pcc, mcc = mx.metric.create("pcc"), mx.metric.create("mcc")
    pcc.update([label], [pred])
    mcc.update([label], [pred])
    assert pcc.get()[1] == pytest.approx(mcc.get()[1])
    by_index = mx.metric.PCC()
    by_index.update([label], [pred.argmax(axis=1)])
    assert by_index.get()[1] == pytest.approx(pcc.get()[1])


def test_pcc_multiclass_against_sklearn_formula_and_order_invariance():
    matrix = np.array([[23, 13, 3], [7, 19, 11], [2, 5, 17]])
    s, c = matrix.sum(), np.trace(matrix)
    t, p = matrix.sum(axis=1), matrix.sum(axis=0)
    expected = (c * s - t @ p) / math.sqrt((s * s - p @ p) * (s * s - t @ t))
    label, pred = _confusion_batch(matrix.tolist())
    metric = mx.metric.PCC()
    metric.update([label], [pred])
    assert metric.get()[1] == pytest.approx(expected)
    one_by_one = mx.metric.PCC()
    for i in reversed(range(label.shape[0])):
        one_by_one.update([label[i:i + 1]], [pred[i:i + 1]])
    assert one_by_one.get()[1] == metric.get()[1]


def test_pcc_rejects_negative_classes():
    with pytest.raises(ValueError, match="non-negative"):
        mx.metric.PCC().update([nd.array([-1, 0])], [nd.array([0, 0])])


@pytest.mark.parametrize("name", ["acc", "f1", "mcc", "pcc", "pearsonr", "nll_loss", "loss",
                                  ["acc", "f1"]])
def test_create_from_config_and_its_json(name):
    metric = mx.metric.create(name)
    config = metric.get_config()
    assert mx.metric.create(json.dumps(config)).get_config() == config
    assert mx.metric.create(config).get_config() == config


def test_create_from_bad_configs_says_what_to_pass():
    with pytest.raises(ValueError, match="not valid JSON"):
        mx.metric.create("{metric: acc")
    with pytest.raises(ValueError, match="no 'metric' key"):
        mx.metric.create({"name": "acc"})
