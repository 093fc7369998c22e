"""`mx.random`: seeding and the same samplers as `mx.nd.random`."""
from .ndarray.random import (exponential, multinomial, normal, randint, randn, seed,  # noqa: F401
                             shuffle, uniform)
from .ndarray.random import (gamma, generalized_negative_binomial,  # noqa: F401
                             negative_binomial, poisson)
