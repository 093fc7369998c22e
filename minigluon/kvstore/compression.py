"""2-bit gradient compression on the worker, with error feedback, as in MXNet.

Each pushed value v of a key is added to that key's residual r; then r >= t sends +t
(r -= t), r <= -t sends -t (r += t), else 0 is sent and r keeps the value. Codes are
packed 16 per uint32 word by minigluon_ext.quantize_2bit (bit layout in minigluon_ext);
servers expand them with dequantize_2bit. Residuals are float32 for float16 keys.

A GPU array (CuPy) is compressed on its device by minigluon_ext.gpu's kernels (the same
rule and bits), its residual kept there too: only the codes, 1/16 of the float32 bytes,
then go to the host.

>>> comp = TwoBitCompressor(0.5)
>>> packed = comp.compress('w', grad_flat, 0, grad_flat.size)   # residual kept for 'w'
"""
import numpy as np

import minigluon_ext as ext
from minigluon_ext import gpu

from . import staging

__all__ = ["TwoBitCompressor"]


class TwoBitCompressor:
    """Per-key residuals and the 2-bit quantizer for one worker."""

    def __init__(self, threshold):
        self.threshold = float(threshold)
        self._residuals = {}

    def residual(self, key, flat):
        """The residual of `key` (zeros at first; float32 for a float16 key)."""
        res = self._residuals.get(key)
        if res is None:
            dtype = np.float32 if flat.dtype == np.float16 else flat.dtype
            res = self._residuals[key] = np.zeros(flat.size, dtype)
        return res

    def compress(self, key, flat, offset, length):
        """The packed codes of flat[offset:offset+length]; updates that slice's residual.
        The codes are on flat's device (a GPU array's codes on the GPU)."""
        if staging.on_device(flat):               # a GPU array: compressed on its device
            return self.compress_on(gpu.kernels(), key, flat, offset, length)
        res = self.residual(key, flat)
        return ext.quantize_2bit(flat[offset:offset + length], res[offset:offset + length],
                                 self.threshold)

    def compress_on(self, kernels, key, flat, offset, length):
        """`compress` by `kernels` (minigluon_ext.gpu.Kernels) on arrays of their backend,
        with the residual of `key` on flat's device."""
        res = self._residuals.get(key)
        if res is None:
            dtype = np.float32 if flat.dtype == np.float16 else flat.dtype
            res = self._residuals[key] = kernels.zeros(flat, flat.size, dtype)
        return kernels.quantize_2bit(flat[offset:offset + length], res[offset:offset + length],
                                     self.threshold)
