"""The one place that reads minigluon's environment variables.

Every variable is read through a small typed getter that fails with a message naming the
variable and the value it got, so a typo never turns into silent default behaviour.
"""
import os

from .base import MXNetError


class ConfigError(MXNetError, ValueError):
    """An environment variable with a value minigluon cannot use."""


def env_int(name, default, minimum=None):
    """Read `name` as an int, or return `default` when it is unset or empty."""
    raw = os.environ.get(name, "").strip()
    if raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name} must be an integer, got {raw!r}") from None
    if minimum is not None and value < minimum:
        raise ConfigError(f"{name} must be >= {minimum}, got {value}")
    return value


def env_flag(name, default=False):
    """Read `name` as a boolean: 1/true/yes/on or 0/false/no/off."""
    raw = os.environ.get(name, "").strip().lower()
    if raw == "":
        return default
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"{name} must be 0 or 1, got {raw!r}")


def simulated_gpus():
    """How many GPUs to simulate with NumPy (MINIGLUON_SIMULATED_GPUS); 0 means real CUDA.

    With N > 0, `mx.gpu(0)` .. `mx.gpu(N-1)` are backed by NumPy arrays that still carry
    their gpu context, so multi-GPU code paths run and are tested on machines without GPUs.
    """
    return env_int("MINIGLUON_SIMULATED_GPUS", 0, minimum=0)
