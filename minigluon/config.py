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


def usable_cores():
    """How many CPU cores this process may run on (its affinity mask where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def kvstore_reduction_nthreads():
    """Threads that sum or compress one big array (MXNET_KVSTORE_REDUCTION_NTHREADS, default 4).

    Capped at `usable_cores()`: on a 2-core machine the default 4 gives 2.
    """
    return min(env_int("MXNET_KVSTORE_REDUCTION_NTHREADS", 4, minimum=1), usable_cores())


def kvstore_bigarray_bound():
    """Arrays with more elements than this are big (MXNET_KVSTORE_BIGARRAY_BOUND, default 1e6).

    Big arrays are reduced with `kvstore_reduction_nthreads()` threads and, in the
    distributed kvstore, split over all servers.
    """
    return env_int("MXNET_KVSTORE_BIGARRAY_BOUND", 1_000_000, minimum=1)


def ext_force_fallback():
    """MINIGLUON_EXT_FALLBACK=1 makes minigluon_ext use its NumPy code even where C is built."""
    return env_flag("MINIGLUON_EXT_FALLBACK", False)


def data_dir():
    """The folder that holds one sub-folder per data set (MINIGLUON_DATA), or None."""
    raw = os.environ.get("MINIGLUON_DATA", "").strip()
    return os.path.expanduser(raw) if raw else None
