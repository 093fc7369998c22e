"""`mx.gluon`: the imperative-and-hybrid model API (Parameter, Block, nn, loss, Trainer)."""
from .parameter import Constant, DeferredInitializationError, Parameter, ParameterDict  # noqa: F401
from .block import Block, HybridBlock, SymbolBlock  # noqa: F401
from .trainer import Trainer  # noqa: F401
from . import utils  # noqa: F401
from . import nn, loss  # noqa: F401
from . import data  # noqa: F401
from . import contrib  # noqa: F401
from . import rnn  # noqa: F401
from . import model_zoo  # noqa: F401
