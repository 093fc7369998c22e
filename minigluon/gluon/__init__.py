"""`mx.gluon`: the imperative-and-hybrid model API (Parameter, Block, nn, loss, Trainer)."""
from .parameter import Constant, DeferredInitializationError, Parameter, ParameterDict  # noqa: F401
from .block import Block, HybridBlock, SymbolBlock  # noqa: F401
