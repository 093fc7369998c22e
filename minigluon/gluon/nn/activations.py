"""Activation layers: Activation, LeakyReLU, PReLU, ELU, SELU, GELU and Swish."""
from ... import initializer
from ...base import MXNetError
from ..block import HybridBlock


class Activation(HybridBlock):
    """Apply a named activation element-wise.

    Parameters
    ----------
    activation : str
        One of 'relu', 'sigmoid', 'tanh', 'softrelu' or 'softsign'.

    Inputs:
        - **data**: array of any shape.
    Outputs:
        - **out**: array of the same shape.

    Example: ``nn.Activation('relu')``.
    """

    def __init__(self, activation, **kwargs):
        self._act_type = activation
        super().__init__(**kwargs)

    def _alias(self):
        return self._act_type

    def hybrid_forward(self, F, x):
        return F.Activation(x, act_type=self._act_type, name="fwd")

    def __repr__(self):
        return f"{type(self).__name__}({self._act_type})"


class LeakyReLU(HybridBlock):
    """Leaky ReLU: x for x > 0, else alpha * x.

    Parameters
    ----------
    alpha : float
        Slope of the negative part, at least 0.

    Inputs:
        - **data**: array of any shape.
    Outputs:
        - **out**: array of the same shape.
    """

    def __init__(self, alpha, **kwargs):
        if alpha < 0:
            raise MXNetError(f"LeakyReLU: alpha (the negative slope) must be >= 0, got {alpha}")
        super().__init__(**kwargs)
        self._alpha = alpha

    def hybrid_forward(self, F, x):
        return F.LeakyReLU(x, act_type="leaky", slope=self._alpha, name="fwd")

    def __repr__(self):
        return f"{type(self).__name__}({self._alpha})"


class PReLU(HybridBlock):
    """Parametric ReLU: x for x > 0, else alpha * x with a learned alpha.

    Parameters
    ----------
    alpha_initializer : Initializer
        Initial alpha, Constant(0.25) by default.
    in_channels : int
        Number of alphas: 1 (shared) or one per channel (axis 1 of the input).

    Inputs:
        - **data**: array of shape (N, C, ...) (or any shape when in_channels is 1).
    Outputs:
        - **out**: array of the same shape.
    """

    def __init__(self, alpha_initializer=initializer.Constant(0.25), in_channels=1, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.alpha = self.params.get("alpha", shape=(in_channels,),
                                         init=alpha_initializer)

    def hybrid_forward(self, F, x, alpha):
        return F.LeakyReLU(x, gamma=alpha, act_type="prelu", name="fwd")

    def __repr__(self):
        return f"{type(self).__name__}(in_channels={self.alpha.shape[0]})"


class ELU(HybridBlock):
    """Exponential linear unit: x for x > 0, else alpha * (exp(x) - 1).

    Inputs:
        - **data**: array of any shape.
    Outputs:
        - **out**: array of the same shape.
    """

    def __init__(self, alpha=1.0, **kwargs):
        super().__init__(**kwargs)
        self._alpha = alpha

    def hybrid_forward(self, F, x):
        return F.LeakyReLU(x, act_type="elu", slope=self._alpha)

    def __repr__(self):
        return f"{type(self).__name__}(alpha={self._alpha})"


class SELU(HybridBlock):
    """Scaled ELU with the self-normalizing constants of Klambauer et al. (2017).

    Inputs:
        - **data**: array of any shape.
    Outputs:
        - **out**: array of the same shape.
    """

    def hybrid_forward(self, F, x):
        return F.LeakyReLU(x, act_type="selu", name="fwd")

    def __repr__(self):
        return f"{type(self).__name__}()"


class GELU(HybridBlock):
    """Gaussian error linear unit: x * Phi(x), Phi the standard normal CDF.

    Inputs:
        - **data**: array of any shape.
    Outputs:
        - **out**: array of the same shape.
    """

    def hybrid_forward(self, F, x):
        return F.LeakyReLU(x, act_type="gelu", name="fwd")

    def __repr__(self):
        return f"{type(self).__name__}()"


class Swish(HybridBlock):
    """Swish: x * sigmoid(beta * x).

    Inputs:
        - **data**: array of any shape.
    Outputs:
        - **out**: array of the same shape.
    """

    def __init__(self, beta=1.0, **kwargs):
        super().__init__(**kwargs)
        self._beta = beta

    def hybrid_forward(self, F, x):
        return x * F.sigmoid(self._beta * x, name="fwd")

    def __repr__(self):
        return f"{type(self).__name__}(beta={self._beta})"
