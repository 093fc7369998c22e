"""`ResizeIter`: give an iterator's epochs a fixed number of batches."""
from .base import DataIter, check_count

__all__ = ["ResizeIter"]


class ResizeIter(DataIter):
    """Make every epoch of `data_iter` exactly `size` batches long.

    A shorter inner epoch is continued by resetting `data_iter` and reading on; a longer
    one is cut, and the next epoch resumes where it stopped unless `reset_internal`.

    Parameters
    ----------
    data_iter : DataIter
    size : int
        Batches per epoch.
    reset_internal : bool
        Also reset `data_iter` on `reset()`.

    >>> it = mx.io.ResizeIter(mx.io.NDArrayIter(np.zeros((10, 2)), batch_size=5), size=3)
    >>> len(list(it))
    3
    """

    def __init__(self, data_iter, size, reset_internal=True):
        super().__init__(data_iter.batch_size)
        self.data_iter = data_iter
        self.size = check_count(size, "size", 0, "ResizeIter")
        self.reset_internal = reset_internal
        self.cur = 0
        self.current_batch = None
        self.provide_data = data_iter.provide_data
        self.provide_label = data_iter.provide_label
        if hasattr(data_iter, "default_bucket_key"):
            self.default_bucket_key = data_iter.default_bucket_key

    def reset(self):
        """Start a new epoch of `size` batches."""
        self.cur = 0
        if self.reset_internal:
            self.data_iter.reset()

    def iter_next(self):
        """Read the next batch, resetting the inner iterator when it runs out."""
        if self.cur == self.size:
            return False
        try:
            self.current_batch = self.data_iter.next()
        except StopIteration:
            self.data_iter.reset()
            self.current_batch = self.data_iter.next()
        self.cur += 1
        return True

    def getdata(self):
        return self.current_batch.data

    def getlabel(self):
        return self.current_batch.label

    def getindex(self):
        return self.current_batch.index

    def getpad(self):
        return self.current_batch.pad
