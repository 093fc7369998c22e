"""`gluon.data`: datasets, samplers (including the distributed SplitSampler) and DataLoader."""
from .dataset import ArrayDataset, Dataset, RecordFileDataset, SimpleDataset  # noqa: F401
from . import sampler, dataloader  # noqa: F401  (gluon.data.dataloader.default_batchify_fn ...)
from .sampler import (BatchSampler, IntervalSampler, RandomSampler, Sampler,  # noqa: F401
                      SequentialSampler, SplitBatchSampler, SplitSampler)
from .dataloader import DataLoader  # noqa: F401
from . import vision  # noqa: F401
