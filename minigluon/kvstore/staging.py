"""Pinned host buffers for a dist worker's GPU arrays: how their bytes reach a message
and a reply's bytes reach them.

A push of a GPU array (CuPy) copies it into a page-locked ("pinned") host buffer on a
CUDA stream of its own, which first waits for the work already queued on the array's
current stream (the one that computed the gradient); the copy is finished before the
bytes are sent. A pull's reply lands in a pinned buffer and is copied to the device
asynchronously, on that stream: later work queued on the current stream waits for the copy
(an event), and so does the next write into that buffer. Pinned memory lets the copy run
at full bus speed without a bounce through pageable memory.

Buffers are kept per tag (a key and a use, e.g. `(3, "push")`): allocated once (grown when
a tag needs more), reused by every later push or pull of it. The caller makes sure no
message still reads a buffer it rewrites (dist.py waits for the send requests of a key
before its next push, as it does for its other own buffers). NumPy arrays never come here.

The copies go through a copier: `CudaCopier` (CuPy, imported on first use); the tests give
one whose "pinned buffers" are NumPy arrays (tests/ext/test_cuda_kvstore_staging.py).

>>> staging = Staging()
>>> host = staging.to_host((3, "push"), grad_on_gpu)     # pinned, complete, flat
>>> dest = staging.buffer((3, "pull"), n, np.float32)    # the reply goes here, then
>>> staging.to_device((3, "pull"), weight_on_gpu)         # async; later kernels see it
"""
import numpy as np

__all__ = ["Staging", "CudaCopier", "on_device"]


def on_device(data):
    """True for a GPU array (anything but a NumPy array: CuPy's), which moves through
    pinned buffers; NumPy arrays (also the simulated GPUs') take the host path."""
    return not isinstance(data, np.ndarray)


class Staging:
    """One worker store's pinned buffers by tag, and the copies through them."""

    def __init__(self, copier=None):
        self._copier = copier
        self._buffers = {}        # tag -> uint8 host buffer
        self._reading = {}        # tag -> copies to a device that still read the buffer

    @property
    def copier(self):
        """The copier (a CudaCopier, made on first use when none was given)."""
        if self._copier is None:
            self._copier = CudaCopier()
        return self._copier

    def buffer(self, tag, n, dtype):
        """The tag's host buffer as n values of dtype, free to write: copies to a device
        that read it are waited for first."""
        for done in self._reading.pop(tag, ()):
            done.synchronize()
        nbytes = n * np.dtype(dtype).itemsize
        raw = self._buffers.get(tag)
        if raw is None or raw.nbytes < nbytes:
            raw = self._buffers[tag] = self.copier.pinned(nbytes)
        return raw[:nbytes].view(dtype)

    def to_host(self, tag, data):
        """The values of the device array `data`, flat, in the tag's host buffer; the copy
        is complete when this returns."""
        flat = data.ravel()               # C order; a copy on the device only if needed
        host = self.buffer(tag, flat.size, flat.dtype)
        self.copier.to_host(flat, host)
        return host

    def to_device(self, tag, dest):
        """Start copying the tag's buffer (which holds dest.size values of dest's dtype)
        into the C-contiguous device array `dest`. Work queued afterwards on dest's device
        sees the values; the buffer is not rewritten before the copy is done."""
        raw = self._buffers.get(tag)
        if raw is None or raw.nbytes < dest.nbytes:
            raise ValueError(f"staging {tag!r}: no host buffer of {dest.nbytes} bytes to copy "
                             f"into an array of shape {dest.shape} ({dest.dtype}); help: fill "
                             "staging.buffer(tag, n, dtype) first")
        if not dest.flags.c_contiguous:
            raise ValueError(f"staging {tag!r}: the device array (shape {dest.shape}, strides "
                             f"{dest.strides}) is not C-contiguous; help: copy into a "
                             "contiguous array and assign that")
        host = raw[:dest.nbytes].view(dest.dtype)
        self._reading.setdefault(tag, []).append(self.copier.to_device(host, dest))

    def __len__(self):
        """How many buffers are allocated (one per tag)."""
        return len(self._buffers)


class CudaCopier:
    """Pinned memory and copies on one non-blocking CUDA stream per device, with CuPy."""

    def __init__(self):
        try:
            import cupy
        except ImportError:
            raise ImportError("a GPU array reached the dist kvstore but CuPy is missing; "
                              "install it with `pip install 'minigluon[gpu]'`") from None
        self.cuda = cupy.cuda
        self._streams = {}

    def pinned(self, nbytes):
        """A page-locked host buffer of nbytes, as a NumPy uint8 array (which keeps the
        memory alive)."""
        mem = self.cuda.alloc_pinned_memory(max(nbytes, 1))
        return np.frombuffer(mem, np.uint8, nbytes)

    def _stream(self, device):
        stream = self._streams.get(device.id)
        if stream is None:
            with device:
                stream = self._streams[device.id] = self.cuda.Stream(non_blocking=True)
        return stream

    def _event(self, stream):
        event = self.cuda.Event(disable_timing=True)
        event.record(stream)
        return event

    def to_host(self, src, dest):
        """Copy the contiguous device array src into the host array dest; returns once
        the values are there."""
        with src.device:
            stream = self._stream(src.device)
            stream.wait_event(self._event(self.cuda.get_current_stream()))  # src is computed
            self.cuda.runtime.memcpyAsync(dest.ctypes.data, src.data.ptr, src.nbytes,
                                          self.cuda.runtime.memcpyDeviceToHost, stream.ptr)
            stream.synchronize()

    def to_device(self, src, dest):
        """Start copying the host array src into the contiguous device array dest; the
        event that marks the copy's end (the current stream waits for it)."""
        with dest.device:
            stream = self._stream(dest.device)
            current = self.cuda.get_current_stream()
            stream.wait_event(self._event(current))          # dest's earlier users first
            self.cuda.runtime.memcpyAsync(dest.data.ptr, src.ctypes.data, dest.nbytes,
                                          self.cuda.runtime.memcpyHostToDevice, stream.ptr)
            done = self._event(stream)
            current.wait_event(done)
            return done
