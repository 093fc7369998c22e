"""Helpers around training: split a batch over devices, clip gradients, fetch files.

Out of scope: MXNet's `shape_is_known` / `HookHandle` helpers and proxies for `download`
(urllib honours the usual `http_proxy` / `https_proxy` variables by itself).
"""
import hashlib
import logging
import os
import uuid
import warnings

import numpy as np

from .. import autograd
from .. import ndarray as nd
from ..base import MXNetError
from ..ndarray import NDArray

__all__ = ["split_data", "split_and_load", "clip_global_norm", "check_sha1", "download",
           "DownloadError"]

_log = logging.getLogger(__name__)
_DOWNLOAD_TIMEOUT_S = 60      # per attempt: a dead connection fails instead of hanging


class DownloadError(MXNetError, OSError):
    """A file could not be downloaded (no network, bad URL, wrong checksum...)."""


# ---- splitting a batch over devices -------------------------------------------------------
class SplitError(MXNetError, ValueError):
    """A batch that cannot be split as asked (a ValueError, as in MXNet)."""


def split_data(data, num_slice, batch_axis=0, even_split=True):
    """Split `data` into `num_slice` slices along `batch_axis` (a list even for one slice).

    With `even_split=False` the sizes differ by at most one, the first slices taking the
    extra samples (numpy.array_split's rule); a batch smaller than `num_slice` then gives
    empty slices at the end.

    >>> [s.shape for s in split_data(mx.nd.zeros((10, 3)), 3, even_split=False)]
    [(4, 3), (3, 3), (3, 3)]
    """
    size = data.shape[batch_axis]
    if even_split and size % num_slice != 0:
        raise SplitError(
            f"data of shape {data.shape} cannot be split evenly into {num_slice} slices along "
            f"axis {batch_axis} (size {size}); use a size that is a multiple of {num_slice} "
            "or pass even_split=False")
    step, extra = divmod(size, num_slice)
    ends = np.cumsum([0] + [step + 1] * extra + [step] * (num_slice - extra)).tolist()
    if data.stype == "csr":
        # csr row slices stay csr (a batch of sparse samples is split by rows)
        if batch_axis != 0:
            raise SplitError(f"split_data: a csr batch splits along axis 0 (its rows) only, "
                             f"got batch_axis={batch_axis}; convert it with "
                             ".tostype('default') to split along another axis")
        return [data[b:e] for b, e in zip(ends[:-1], ends[1:])]
    return [nd.slice_axis(data, axis=batch_axis, begin=b, end=e)
            for b, e in zip(ends[:-1], ends[1:])]


def split_and_load(data, ctx_list, batch_axis=0, even_split=True):
    """Split `data` (an NDArray or NumPy array) along `batch_axis` and put slice i on
    `ctx_list[i]`: the usual first step of data-parallel training.

    >>> xs = split_and_load(batch, [mx.cpu(0), mx.cpu(1)])
    """
    if not isinstance(data, NDArray):
        data = nd.array(data, ctx=ctx_list[0])
    if len(ctx_list) == 1:
        return [data.as_in_context(ctx_list[0])]
    size = data.shape[batch_axis]
    if even_split and size % len(ctx_list) != 0:
        raise SplitError(
            f"split_and_load: a batch of size {size} (axis {batch_axis} of shape {data.shape}) "
            f"does not split evenly over {len(ctx_list)} contexts {list(ctx_list)}; use a "
            f"batch size divisible by {len(ctx_list)}, or pass even_split=False")
    slices = split_data(data, len(ctx_list), batch_axis, even_split)
    return [s.as_in_context(ctx) for s, ctx in zip(slices, ctx_list)]


# ---- gradient clipping ---------------------------------------------------------------------
def clip_global_norm(arrays, max_norm, check_isfinite=True):
    """Scale `arrays` in place so that their joint 2-norm is at most `max_norm`.

    Returns the norm before clipping: a float, or an NDArray on the first array's device
    when `check_isfinite` is False (which also skips the NaN/inf warning).

    >>> grads = [p.grad(ctx) for p in net.collect_params().values()]
    >>> norm = gluon.utils.clip_global_norm(grads, 1.0)
    """
    if not arrays:
        raise MXNetError("clip_global_norm: got no arrays to clip")
    ctx = arrays[0].context
    with autograd.pause():
        values = [_stored_values(a) for a in arrays]
        squares = [float((v.astype(np.float64) ** 2).sum()) for v in values]
        total = float(np.sqrt(sum(squares)))
        if check_isfinite and not np.isfinite(total):
            warnings.warn("clip_global_norm: the norm is NaN or infinite, so the clipped "
                          "arrays are undefined", UserWarning, stacklevel=2)
        scale = min(max_norm / (total + 1e-8), 1.0)
        if scale < 1.0:
            for v in values:
                v *= v.dtype.type(scale)
    if check_isfinite:
        return total
    return nd.array([total], ctx=ctx)


def _stored_values(arr):
    """The raw values of `arr`, scaled in place: a sparse array's stored values (the zeros
    it leaves out add nothing to the norm)."""
    return arr._data if arr.stype == "default" else arr._data.data


# ---- files ---------------------------------------------------------------------------------
def check_sha1(filename, sha1_hash):
    """True if the SHA-1 of the file's content starts with `sha1_hash` (a full or a
    shortened hex digest)."""
    sha1 = hashlib.sha1()
    with open(filename, "rb") as fin:
        for chunk in iter(lambda: fin.read(1 << 20), b""):
            sha1.update(chunk)
    digest = sha1.hexdigest()
    length = min(len(digest), len(sha1_hash))
    return length > 0 and digest[:length] == sha1_hash[:length].lower()


def _target_path(url, path):
    name = url.split("/")[-1]
    if path is None:
        if not name:
            raise DownloadError(f"cannot take a file name from URL {url!r}; pass path=")
        return name
    path = os.path.expanduser(path)
    return os.path.join(path, name) if os.path.isdir(path) else path


def download(url, path=None, overwrite=False, sha1_hash=None, retries=5, verify_ssl=True):
    """Download `url` to `path` (a file, or a directory to put it in; default: the URL's
    file name in the current directory) and return the file name.

    An existing file is kept unless `overwrite`, or unless its SHA-1 differs from
    `sha1_hash`. A failed attempt is retried `retries` times.

    >>> fname = gluon.utils.download('https://example.org/data.csv', path='datasets/')
    """
    import urllib.error   # here, not at the top: ssl and http cost every process's import
    if not isinstance(retries, int) or retries < 0:
        raise DownloadError(f"retries must be an int >= 0, got {retries!r}")
    fname = _target_path(url, path)
    if not (overwrite or not os.path.exists(fname)
            or (sha1_hash and not check_sha1(fname, sha1_hash))):
        return fname
    if not verify_ssl:
        warnings.warn("download: verify_ssl=False makes an unverified HTTPS request; keep "
                      "certificate verification on where you can", UserWarning, stacklevel=2)
    dirname = os.path.dirname(os.path.abspath(fname))
    os.makedirs(dirname, exist_ok=True)
    errors = []
    for attempt in range(retries + 1):
        try:
            _fetch_once(url, fname, verify_ssl)
            break
        except (OSError, urllib.error.URLError, ValueError) as err:
            errors.append(err)
            _log.info("download of %s failed (%r), %d attempt(s) left", url, err,
                      retries - attempt)
    else:
        raise DownloadError(_failure_message(url, fname, retries + 1, errors[-1])) \
            from errors[-1]
    if sha1_hash and not check_sha1(fname, sha1_hash):
        raise DownloadError(f"{fname}: downloaded from {url}, but its SHA-1 does not match "
                            f"{sha1_hash}; the file may be incomplete or the URL outdated")
    return fname


def _fetch_once(url, fname, verify_ssl):
    """Download into a temporary file next to `fname`, then move it into place, so a
    reader never sees a partial file."""
    import ssl
    import urllib.request
    _log.info("downloading %s from %s", fname, url)
    context = None
    if not verify_ssl:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    tmp = f"{fname}.{uuid.uuid4().hex}.part"
    try:
        with urllib.request.urlopen(url, timeout=_DOWNLOAD_TIMEOUT_S,
                                    context=context) as resp, open(tmp, "wb") as fout:
            status = getattr(resp, "status", None)
            if status is not None and status != 200:
                raise DownloadError(f"{url}: the server answered HTTP {status}")
            for chunk in iter(lambda: resp.read(1 << 16), b""):
                fout.write(chunk)
        os.replace(tmp, fname)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def _failure_message(url, fname, attempts, err):
    import urllib.error
    head = f"could not download {url} after {attempts} attempt(s)"
    if isinstance(err, urllib.error.HTTPError):
        return f"{head}: HTTP {err.code} {err.reason}; check the URL"
    reason = getattr(err, "reason", err)
    if isinstance(reason, OSError) and not url.lower().startswith("file:"):
        return (f"{head}: {reason}. The network may be unreachable (offline machine, "
                "firewall or proxy): download the file elsewhere and copy it to "
                f"{fname}, then call download again (pass sha1_hash to have it verified)")
    return f"{head}: {reason}; check the URL"
