"""`mx.mod` (also `mx.module`): MXNet 1.x's symbolic Module API on one device.

>>> mod = mx.mod.Module(sym, data_names=('data',), label_names=('label',))
>>> mod.fit(train_iter, num_epoch=5, optimizer='sgd', eval_metric='acc')
"""
from .base_module import BaseModule, BatchEndParam  # noqa: F401
from .checkpoint import load_checkpoint, save_checkpoint  # noqa: F401
from .module import Module  # noqa: F401

__all__ = ["BaseModule", "BatchEndParam", "Module", "load_checkpoint", "save_checkpoint"]
