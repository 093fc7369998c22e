"""Legacy unary math operators beyond ops_elemwise's core set: inverse trigonometric and
hyperbolic functions, angle conversion and the reciprocal cube root.

Each is one `register_unary` line: forward and gradient side by side, the gradient written
with Python operators and `xp.*` calls so that `autograd.grad(create_graph=True)` records it
(second and higher derivatives come from differentiating these formulas). As in MXNet, an
input outside a function's domain (arcsin(2), arccosh(0.5)) gives NaN, not an error.
"""
import math

from .ops_elemwise import register_unary

register_unary("arcsin", lambda xp, x: xp.arcsin(x),
               lambda xp, x, y, dy: dy / xp.sqrt(1 - x * x))
register_unary("arccos", lambda xp, x: xp.arccos(x),
               lambda xp, x, y, dy: -dy / xp.sqrt(1 - x * x))
register_unary("arcsinh", lambda xp, x: xp.arcsinh(x),
               lambda xp, x, y, dy: dy / xp.sqrt(x * x + 1))
register_unary("arccosh", lambda xp, x: xp.arccosh(x),
               lambda xp, x, y, dy: dy / xp.sqrt(x * x - 1))
register_unary("arctanh", lambda xp, x: xp.arctanh(x),
               lambda xp, x, y, dy: dy / (1 - x * x))
register_unary("radians", lambda xp, x: x * (math.pi / 180),
               lambda xp, x, y, dy: dy * (math.pi / 180))
register_unary("degrees", lambda xp, x: x * (180 / math.pi),
               lambda xp, x, y, dy: dy * (180 / math.pi))
# d/dx x^(-1/3) = -x^(-4/3) / 3 = -y / (3x)
register_unary("rcbrt", lambda xp, x: 1 / xp.cbrt(x),
               lambda xp, x, y, dy: -dy * y / (3 * x))
