"""Matrix products with NumPy's rules: dot and matmul."""
from .dispatch import call


def dot(a, b):
    """NumPy's dot: sums over a's last axis and b's second-to-last (or only) axis; scalars
    multiply.

    >>> mx.np.dot(mx.np.ones((2, 3)), mx.np.ones(3))
    array([3., 3.], dtype=float32)
    """
    return call("_np_dot", a, b)


def matmul(a, b):
    """NumPy's matmul (`a @ b`): matrix products over the last two axes, the leading axes
    broadcast; a 1-D operand acts as a row (a) or column (b) vector."""
    return call("_np_matmul", a, b)
