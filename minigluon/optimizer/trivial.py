"""MXNet's `Test` optimizer: a trivial rule that unit tests of kvstores and updaters use."""
from .optimizer import Optimizer, register

__all__ = ["Test"]


@register
class Test(Optimizer):
    """Adds the rescaled gradient to the weight and keeps a copy of the new weight as its
    state: `weight += rescale_grad * grad; state = weight`. Its result is easy to predict,
    which is what tests of the machinery around optimizers need.

    >>> opt = mx.optimizer.create('test', rescale_grad=0.5)
    """

    def create_state(self, index, weight):
        """A float32 zero array of the weight's shape, as MXNet's Test creates."""
        return self._zeros_like(weight, dtype="float32")

    def _step(self, xp, index, weight, grad, state, lr, wd):
        weight += grad * float(self.rescale_grad)
        state[...] = weight
