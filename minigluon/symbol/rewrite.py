"""Rewrites of a CachedGraph's flat step list that give the same values with less work.

A step is (op, input refs, attrs, first output slot, number of outputs); a ref is
("slot", index) or ("lit", value). Rewrites only run on hybridized graphs, which is part of
what hybridize() buys over running the same ops one by one. Two rewrites, in this order:

BatchNorm then relu or clip -> one `_BatchNormAct` step (ops_nn.py). Every BatchNorm of the
zoo's ResNets, MobileNet-v2 (ReLU6 = clip(0, 6)) and DenseNet is followed by one; fused,
the activation runs inside BatchNorm's passes over the map (minigluon_ext's fused
kernels), its output is the only map written, and its backward applies the activation's
mask inside BatchNorm's gradient passes. Values, gradients and moving statistics are the
unfused ones, bit for bit. Applied only when the BatchNorm has one output (no
output_mean_var) and nothing but the activation reads it; MINIGLUON_FUSE_BN_ACT=0 turns
it off (to compare).

relu then max-pooling -> max-pooling then relu. relu is non-decreasing, so
max(relu(window)) == relu(max(window)) for every window that holds at least one element,
and the pooled map is a quarter (2x2) or less of the relu'd one: the relu and its gradient
touch 4x fewer values, and the full-size relu output is never stored. Gradients agree too:
where the window's maximum is positive both orders send dy to its first position; where it
is not, relu's mask zeroes the gradient in both. Applied only when the relu's output feeds
nothing but the pooling and every window holds an element (no padding, 'valid' windows).
A relu fused into its BatchNorm is no longer a relu step, so it is not swapped.
"""
import numbers

from .. import config
from ..ndarray import registry


def optimize(steps, output_slots):
    """`steps` with BatchNorm -> activation pairs fused, then every relu -> max-pool pair
    swapped (see the module doc)."""
    steps = list(steps)
    if config.fuse_bn_act():
        steps = _fuse_bn_act(steps, output_slots)
    for i, j in _relu_pool_pairs(steps, output_slots):
        relu, pool = steps[i], steps[j]
        src, mid, out = relu[1][0][1], relu[3], pool[3]
        steps[i] = (pool[0], [("slot", src)], pool[2], mid, 1)
        steps[j] = (relu[0], [("slot", mid)], relu[2], out, 1)
    return steps


def _fuse_bn_act(steps, output_slots):
    """`steps` with each fusable BatchNorm step replaced by `_BatchNormAct` writing its
    activation's output slot, and the activation's step dropped. The BatchNorm's own slot
    is then never written: nothing else read it."""
    fused_op, gone = registry.get("_BatchNormAct"), set()
    steps = list(steps)
    for i, j in _only_reader_pairs(steps, output_slots, _is_plain_batch_norm,
                                   _activation_attrs):
        bn, act = steps[i], steps[j]
        attrs = dict(bn[2], **_activation_attrs(act))
        steps[i] = (fused_op, bn[1], attrs, act[3], 1)
        gone.add(j)
    return [step for k, step in enumerate(steps) if k not in gone]


def _relu_pool_pairs(steps, output_slots):
    """(relu step, pooling step) index pairs that can be swapped."""
    return _only_reader_pairs(steps, output_slots, _is_relu,
                              lambda step: _is_plain_max_pool(step[0], step[2]))


def _only_reader_pairs(steps, output_slots, first_ok, second_ok):
    """(i, j) pairs where step j reads, as its one input, the one output of step i, and
    nothing else reads it (no other step, not the graph's outputs); first_ok(step i) and
    second_ok(step j) hold."""
    readers = {}
    for k, (_, refs, _, _, _) in enumerate(steps):
        for kind, ref in refs:
            if kind == "slot":
                readers.setdefault(ref, []).append(k)
    producer = {step[3]: k for k, step in enumerate(steps) if step[4] == 1}
    pairs = []
    for j, (op, refs, attrs, _, count) in enumerate(steps):
        if not (len(refs) == 1 and refs[0][0] == "slot" and second_ok(steps[j])):
            continue
        mid = refs[0][1]
        i = producer.get(mid)
        if i is None or not first_ok(steps[i]) or readers.get(mid) != [j] or \
                mid in output_slots:
            continue
        pairs.append((i, j))
    return pairs


def _is_relu(step):
    op, refs, attrs, _, count = step
    if count != 1 or len(refs) != 1 or refs[0][0] != "slot":
        return False
    return op.name == "relu" or (op.name == "Activation" and attrs.get("act_type") == "relu")


def _is_plain_max_pool(op, attrs):
    """Max pooling whose every window holds at least one input element."""
    if op.name != "Pooling" or attrs.get("pool_type", "max") != "max":
        return False
    if attrs.get("global_pool"):
        return True
    return not any(attrs.get("pad") or ()) and \
        attrs.get("pooling_convention", "valid") == "valid"


def _is_plain_batch_norm(step):
    """A BatchNorm with its one output and its five inputs all values of the graph."""
    op, refs, attrs, _, count = step
    return op.name == "BatchNorm" and count == 1 and not attrs.get("output_mean_var") and \
        len(refs) == 5 and all(kind == "slot" for kind, _ in refs)


def _activation_attrs(step):
    """_BatchNormAct's attributes for an activation step it can take in, else None."""
    op, refs, attrs, _, count = step
    if _is_relu(step):
        return {"act_type": "relu"}
    bounds = [attrs.get("a_min"), attrs.get("a_max")]
    if op.name == "clip" and count == 1 and set(attrs) == {"a_min", "a_max"} and \
            all(isinstance(v, numbers.Real) for v in bounds) and bounds[0] <= bounds[1]:
        return {"act_type": "clip", "a_min": attrs["a_min"], "a_max": attrs["a_max"]}
    return None
