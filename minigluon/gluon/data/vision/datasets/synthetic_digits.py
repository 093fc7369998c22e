"""SyntheticDigits: procedurally drawn, MNIST-shaped digits for smoke tests and examples on
machines without the real files."""
import logging

import numpy as np

from .....base import MXNetError
from .downloads import DownloadedDataset
from .glyphs import render_digits

__all__ = ["SyntheticDigits"]

_log = logging.getLogger(__name__)


class SyntheticDigits(DownloadedDataset):
    """Procedurally drawn digits shaped like MNIST: (28, 28, 1) uint8 images, labels 0-9.

    SYNTHETIC DATA, NOT MNIST: each digit is a hand-made stroke glyph under a random affine
    distortion with random stroke width and noise. Use it for smoke tests and examples on
    machines without the real files; a LeNet learns it well (> 90 %), but numbers measured
    on it say nothing about MNIST. Creating one logs a WARNING saying so.

    Parameters
    ----------
    num_samples : int, optional
        Number of samples (default 10000 for train, 2000 for test).
    train : bool
        Train and test sets come from different random streams.
    seed : int
        Same seed and `train`, same data.
    transform : callable, optional
        Called as `transform(data, label)`.
    """

    _name = "synthetic-digits"

    def __init__(self, num_samples=None, train=True, seed=0, transform=None):
        if num_samples is None:
            num_samples = 10000 if train else 2000
        if not isinstance(num_samples, (int, np.integer)) or num_samples <= 0:
            raise MXNetError(f"SyntheticDigits: num_samples must be a positive int, got "
                             f"{num_samples!r}")
        self._num_samples, self._train, self._seed = int(num_samples), train, seed
        _log.warning("*** SyntheticDigits: this data is SYNTHETIC (procedurally drawn digits), "
                     "NOT MNIST. Accuracies measured on it say nothing about MNIST. ***")
        super().__init__("", transform)

    def _get_data(self):
        rng = np.random.default_rng([int(self._seed), 1 if self._train else 2])
        labels = rng.integers(0, 10, self._num_samples)
        images = render_digits(labels, rng)
        self._set(images[:, :, :, None], labels, "SyntheticDigits")
