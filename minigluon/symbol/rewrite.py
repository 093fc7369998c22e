"""Rewrites of a CachedGraph's flat step list that give the same values with less work.

A step is (op, input refs, attrs, first output slot, number of outputs); a ref is
("slot", index) or ("lit", value). Rewrites only run on hybridized graphs, which is part of
what hybridize() buys over running the same ops one by one.

relu then max-pooling -> max-pooling then relu. relu is non-decreasing, so
max(relu(window)) == relu(max(window)) for every window that holds at least one element,
and the pooled map is a quarter (2x2) or less of the relu'd one: the relu and its gradient
touch 4x fewer values, and the full-size relu output is never stored. Gradients agree too:
where the window's maximum is positive both orders send dy to its first position; where it
is not, relu's mask zeroes the gradient in both. Applied only when the relu's output feeds
nothing but the pooling and every window holds an element (no padding, 'valid' windows).
"""


def optimize(steps, output_slots):
    """`steps` with every relu -> max-pool pair swapped (see the module doc)."""
    steps = list(steps)
    for i, j in _relu_pool_pairs(steps, output_slots):
        relu, pool = steps[i], steps[j]
        src, mid, out = relu[1][0][1], relu[3], pool[3]
        steps[i] = (pool[0], [("slot", src)], pool[2], mid, 1)
        steps[j] = (relu[0], [("slot", mid)], relu[2], out, 1)
    return steps


def _relu_pool_pairs(steps, output_slots):
    """(relu step, pooling step) index pairs that can be swapped."""
    readers = {}
    for k, (_, refs, _, _, _) in enumerate(steps):
        for kind, ref in refs:
            if kind == "slot":
                readers.setdefault(ref, []).append(k)
    producer = {step[3]: k for k, step in enumerate(steps) if step[4] == 1}
    pairs = []
    for j, (op, refs, attrs, _, count) in enumerate(steps):
        if not (_is_plain_max_pool(op, attrs) and len(refs) == 1 and refs[0][0] == "slot"):
            continue
        mid = refs[0][1]
        i = producer.get(mid)
        if i is None or not _is_relu(steps[i]) or readers.get(mid) != [j] or \
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
