"""Name prefixes for the operator nodes of a graph, as MXNet's `mx.name.Prefix` gives them.

A block traced on Symbols names its operators under its own prefix: inside Dense 'dense0_'
the node `FullyConnected(..., name='fwd')` is 'dense0_fwd' (outputs 'dense0_fwd_output'),
and unnamed nodes count per scope: 'dense0_fullyconnected0'. The innermost scope wins, as a
child block's prefix already starts with its parent's.
"""
import threading

_local = threading.local()


class Prefix:
    """Within `with Prefix('net_'):` operator nodes are named 'net_' + their name.

    Example::

        with Prefix('net_'):
            y = mx.sym.relu(x, name='act')      # y.name == 'net_act'
    """

    def __init__(self, prefix):
        self.prefix = prefix
        self._counters = {}
        self._old = None

    def get(self, name, hint):
        """The node name for `name`, or for the next unnamed node of kind `hint`."""
        if name is None:
            count = self._counters.get(hint, 0)
            self._counters[hint] = count + 1
            name = f"{hint}{count}"
        return self.prefix + name

    def __enter__(self):
        self._old = current()
        _local.value = self
        return self

    def __exit__(self, *exc):
        _local.value = self._old


def current():
    """The innermost active Prefix, or None."""
    return getattr(_local, "value", None)
