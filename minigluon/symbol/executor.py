"""Executor: a Symbol bound to arrays (`sym.bind(ctx, args)`), run forward and backward."""
from .. import autograd
from ..base import MXNetError
from ..context import current_context
from ..ndarray.ndarray import NDArray
from .graph import CachedGraph


class Executor:
    """Runs a bound graph: `exe.forward(is_train)`, `exe.backward(out_grads)`, `exe.outputs`."""

    def __init__(self, symbol, ctx, args, args_grad=None, grad_req="write"):
        self._symbol = symbol
        self._ctx = ctx or current_context()
        names = symbol.list_arguments()
        self._graph = CachedGraph(symbol, names)
        self.arg_dict = self._as_dict(names, args, "args")
        self.grad_dict = self._as_dict(names, args_grad, "args_grad") if args_grad else {}
        self._grad_req = grad_req
        self.outputs = []

    def _as_dict(self, names, arrays, what):
        if arrays is None:
            arrays = {}
        if isinstance(arrays, (list, tuple)):
            if len(arrays) != len(names):
                raise MXNetError(f"bind: {what} has {len(arrays)} arrays for the "
                                 f"{len(names)} arguments {names}")
            arrays = dict(zip(names, arrays))
        out = {}
        for name, arr in arrays.items():
            if name not in names:
                raise MXNetError(f"bind: {what} names {name!r}, which is not an argument of "
                                 f"the symbol; arguments are {names}")
            out[name] = arr.as_in_context(self._ctx) if isinstance(arr, NDArray) else arr
        return out

    @property
    def arg_arrays(self):
        return [self.arg_dict.get(n) for n in self._graph.input_names]

    @property
    def grad_arrays(self):
        return [self.grad_dict.get(n) for n in self._graph.input_names]

    def forward(self, is_train=False, **kwargs):
        """Run the graph; `kwargs` replace bound arguments. Returns the outputs."""
        for name, arr in kwargs.items():
            if name not in self._graph.input_names:
                raise MXNetError(f"forward: unknown argument {name!r}")
            self.arg_dict[name] = arr.as_in_context(self._ctx) if isinstance(arr, NDArray) else arr
        missing = [n for n in self._graph.input_names if n not in self.arg_dict]
        if missing:
            raise MXNetError(f"forward: arguments {missing} are not bound; pass them to bind() "
                             "or forward()")
        inputs = self.arg_arrays
        if is_train and self.grad_dict:
            autograd.mark_variables([self.arg_dict[n] for n in self.grad_dict],
                                    list(self.grad_dict.values()), self._grad_req)
            with autograd.record(train_mode=True):
                self.outputs = self._graph(inputs)
        else:
            with autograd.pause(train_mode=is_train):
                self.outputs = self._graph(inputs)
        return self.outputs

    def backward(self, out_grads=None, is_train=True):
        """Gradients of the outputs into `grad_dict` (needs args_grad at bind)."""
        if not self.grad_dict:
            raise MXNetError("backward: bind with args_grad to get gradients")
        autograd.backward(self.outputs, out_grads, train_mode=is_train)
