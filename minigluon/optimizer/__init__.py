"""`mx.optimizer`: update rules for parameters, with MXNet 1.x names.

>>> opt = mx.optimizer.create('adam', learning_rate=1e-3, wd=1e-4)
>>> updater = mx.optimizer.get_updater(opt)
>>> updater(0, grad, weight)

The formulas of the rules that MXNet runs as fused operators live once, in
`minigluon/ndarray/ops_optimizer.py` (`mx.nd.sgd_update`, ...), and the rules call them.

Sparse weights, gradients and states are updated as in MXNet: lazily (only the rows a
row_sparse gradient stores) by SGD and Adam with lazy_update, Ftrl and AdaGrad, every row
otherwise (see optimizer.py).

Out of scope: MXNet's LBSGD.
"""
from .optimizer import Optimizer, OptimizerError, SchedulerConflict, create, register  # noqa: F401
from .sgd import SGD  # noqa: F401
from .nag import NAG  # noqa: F401
from .adam import Adam  # noqa: F401
from .adagrad import AdaGrad  # noqa: F401
from .adadelta import AdaDelta  # noqa: F401
from .rmsprop import RMSProp  # noqa: F401
from .signum import Signum  # noqa: F401
from .adamax import Adamax  # noqa: F401
from .nadam import Nadam  # noqa: F401
from .ftrl import Ftrl  # noqa: F401
from .lamb import LAMB  # noqa: F401
from .lars import LARS  # noqa: F401
from .dcasgd import DCASGD  # noqa: F401
from .ftml import FTML  # noqa: F401
from .sgld import SGLD  # noqa: F401
from .trivial import Test  # noqa: F401
from .updater import Updater, get_updater  # noqa: F401

__all__ = ["Optimizer", "SGD", "NAG", "Adam", "AdaGrad", "AdaDelta", "RMSProp", "Signum",
           "Adamax", "Nadam", "Ftrl", "LAMB", "LARS", "DCASGD", "FTML", "SGLD", "Test",
           "create", "register", "get_updater", "Updater", "OptimizerError", "SchedulerConflict"]
