"""SyncBatchNorm: MXNet's cross-device batch normalization, on minigluon's eager arrays.

MXNet runs one SyncBatchNorm per device of a data-parallel split and makes the devices
exchange their partial sums, so every slice is normalized with the whole batch's statistics.
That exchange needs the devices' forward passes to run at the same time (MXNet's engine is
asynchronous); minigluon runs each `layer(x_slice)` to completion before the next starts, so
a slice cannot wait for the others. Here each call therefore normalizes with the statistics
of the slice it is given: with `num_devices=1` (one device, the whole batch) that is exactly
MXNet's result; with several devices it is plain per-device BatchNorm (docs/gluon-mxnet.md).
"""
from ...base import MXNetError
from ..nn.basic_layers import BatchNorm

__all__ = ["SyncBatchNorm"]


class SyncBatchNorm(BatchNorm):
    """Batch normalization meant to share statistics across `num_devices` devices.

    Parameters
    ----------
    in_channels : int
        Number of channels (axis 1); 0 infers it from the first input.
    num_devices : int or None
        Devices the batch is split over (None: one). minigluon normalizes each device's slice
        with that slice's statistics, so the result equals MXNet's only for one device.
    momentum, epsilon, center, scale, use_global_stats, beta_initializer, gamma_initializer,
    running_mean_initializer, running_variance_initializer :
        As for nn.BatchNorm.

    Inputs:
        - **data**: array of shape (N, C, ...).
    Outputs:
        - **out**: array of the same shape.

    Example::

        bn = gluon.contrib.nn.SyncBatchNorm(in_channels=3, num_devices=1)
    """

    def __init__(self, in_channels=0, num_devices=None, momentum=0.9, epsilon=1e-5,
                 center=True, scale=True, use_global_stats=False, beta_initializer="zeros",
                 gamma_initializer="ones", running_mean_initializer="zeros",
                 running_variance_initializer="ones", **kwargs):
        num_devices = 1 if num_devices is None else num_devices
        if not isinstance(num_devices, int) or num_devices < 1:
            raise MXNetError(f"SyncBatchNorm: num_devices must be a positive integer, got "
                             f"{num_devices!r}")
        super().__init__(axis=1, momentum=momentum, epsilon=epsilon, center=center,
                         scale=scale, use_global_stats=use_global_stats,
                         beta_initializer=beta_initializer, gamma_initializer=gamma_initializer,
                         running_mean_initializer=running_mean_initializer,
                         running_variance_initializer=running_variance_initializer,
                         in_channels=in_channels, **kwargs)
        self.num_devices = num_devices
