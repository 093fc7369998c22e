"""Block.summary(): a table of each layer's output shape and parameter count."""
import numpy as np

from ..ndarray.ndarray import NDArray


def _shapes(out):
    if isinstance(out, NDArray):
        return str(out.shape)
    if isinstance(out, (list, tuple)):
        return ", ".join(_shapes(o) for o in out)
    return type(out).__name__


def _own_param_count(block):
    return sum(int(np.prod(p.shape)) for p in block._reg_params.values() if p.shape)


def summarize(block, inputs):
    """Run `block(*inputs)` once and describe every layer it called.

    As in MXNet, the block must not be hybridized: a hybridized block runs as one graph, so
    its layers' hooks would not see their outputs. This is checked before anything runs.
    """
    for b in _all_blocks(block):
        if getattr(b, "_active", False):
            raise AssertionError(f"{b.name!r} must not be hybridized to print summary; call "
                                 "summary() before hybridize(), or after hybridize(False)")
    rows, handles = [], []

    def record(layer, args, out):
        rows.append((f"{type(layer).__name__}-{len(rows) + 1}", _shapes(out),
                     _own_param_count(layer)))

    def visit(b):
        handles.append(b.register_forward_hook(record))
    block.apply(visit)
    try:
        block(*inputs)
    finally:
        for h in handles:
            h.detach()
    total = sum(int(np.prod(p.shape)) for p in block.collect_params().values())
    trainable = sum(int(np.prod(p.shape)) for p in block.collect_params().values()
                    if p.grad_req != "null")
    width = max([len(r[0]) for r in rows] + [20])
    lines = [f"{'Layer (type)':<{width}}  {'Output Shape':<28}  {'Param #':>10}",
             "=" * (width + 42),
             f"{'Input':<{width}}  {_shapes(list(inputs)):<28}  {0:>10}"]
    lines += [f"{name:<{width}}  {shape:<28}  {count:>10}" for name, shape, count in rows]
    lines += ["=" * (width + 42), f"Parameters in forward computation graph: {total}",
              f"Trainable params: {trainable}", f"Non-trainable params: {total - trainable}"]
    return "\n".join(lines)


def _all_blocks(block):
    out = [block]
    for child in block._children.values():
        out.extend(_all_blocks(child))
    return out
