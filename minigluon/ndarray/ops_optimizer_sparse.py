"""The fused optimizer updates (`nd.sgd_update`, `nd.adam_update`, ...) with sparse operands.

Each update op gets a sparse kernel that runs the op's own dense formula through
`sparse_update.update_rows`, so the result is MXNet's:

| op | lazy (only the row_sparse grad's rows change) when | otherwise |
| --- | --- | --- |
| `sgd_update` | `lazy_update=True`, weight dense or row_sparse | standard update |
| `sgd_mom_update`, `adam_update` | the same, and every state in the weight's stype | standard |
| `ftrl_update` | weight and states all row_sparse | standard update |
| `_sparse_adagrad_update` | weight dense or row_sparse, the history in its stype | standard |
| every other update op (rmsprop, signum, nag, ftml, mp_*) | never | standard update |

The standard update equals the dense update. The states change in place in their own
storage type (the registry's plain storage fallback would update dense copies of them and
lose that, where MXNet's fallback writes them back); the new weight keeps the weight's
storage type (row_sparse with every row stored).
"""
from ..base import ShapeError
from .registry import OPS, register_sparse
from .sparse_storage import stype_of
from .sparse_update import update_rows

_ROW_STYPES = ("default", "row_sparse")


def _lazy_flag(weight, states, attrs):
    return bool(attrs.get("lazy_update", True)) and stype_of(weight) in _ROW_STYPES


def _row_storage(weight, states, attrs):
    return stype_of(weight) in _ROW_STYPES and \
        all(stype_of(s) == stype_of(weight) for s in states)


def _lazy_flag_states_match(weight, states, attrs):
    return _lazy_flag(weight, states, attrs) and _row_storage(weight, states, attrs)


def _all_row_sparse(weight, states, attrs):
    return all(stype_of(a) == "row_sparse" for a in (weight,) + states)


def _never(weight, states, attrs):
    return False


def _kernel(name, lazy_when):
    """A sparse kernel for the update op `name`: the weight is copied, updated by the op's
    dense formula (all rows, or the grad's rows when `lazy_when(...)` holds) and returned;
    the states change in place."""
    op = OPS[name]
    n_states = len(op.inputs) - 2

    def kernel(xp, weight, grad, *rest, **attrs):
        states, extra = rest[:n_states], rest[n_states:]
        if not hasattr(weight, "shape") or not hasattr(grad, "shape"):
            return NotImplemented       # the op itself reports the missing input
        _check_shapes(name, weight, grad, states)
        lazy = stype_of(grad) == "row_sparse" and lazy_when(weight, states, attrs)
        new = weight.copy()

        def step(w, g, s):
            w[...] = op.fn(xp, w, g, *s, *extra, **attrs)[0]
        update_rows(xp, step, new, grad, states, lazy)
        return new, None
    kernel.__name__ = f"{name}_sparse"
    return kernel


def _check_shapes(name, weight, grad, states):
    for a in (grad,) + tuple(s for s in states if s is not None):
        if a.shape != weight.shape:
            raise ShapeError(f"{name}: every input must have the weight's shape {weight.shape}, "
                             f"got {a.shape}")


_POLICIES = {
    "sgd_update": _lazy_flag,
    "sgd_mom_update": _lazy_flag_states_match,
    "adam_update": _lazy_flag_states_match,
    "ftrl_update": _all_row_sparse,
    "_sparse_adagrad_update": _row_storage,
}
_STANDARD_ONLY = ("nag_mom_update", "signsgd_update", "signum_update", "rmsprop_update",
                  "rmspropalex_update", "ftml_update", "mp_sgd_update", "mp_sgd_mom_update",
                  "mp_nag_mom_update")

for _name, _policy in list(_POLICIES.items()) + [(n, _never) for n in _STANDARD_ONLY]:
    register_sparse(_name)(_kernel(_name, _policy))
