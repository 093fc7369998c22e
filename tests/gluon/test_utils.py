"""gluon.utils: batch splitting over devices, global-norm clipping against NumPy, SHA-1
checks, and download from file:// and a local HTTP server, plus the offline error."""
import hashlib
import http.server
import socket
import threading
import warnings

import numpy as np
import pytest

import minigluon as mx
from minigluon import nd
from minigluon.base import MXNetError
from minigluon.gluon import utils
from minigluon.gluon.utils import DownloadError


# ---- split_data / split_and_load ----------------------------------------------------------
def test_split_data_even_and_uneven():
    data = nd.array(np.arange(30).reshape(10, 3))
    parts = utils.split_data(data, 5)
    assert [p.shape for p in parts] == [(2, 3)] * 5
    np.testing.assert_array_equal(np.concatenate([p.asnumpy() for p in parts]), data.asnumpy())
    uneven = utils.split_data(data, 3, even_split=False)
    assert [p.shape for p in uneven] == [(4, 3), (3, 3), (3, 3)]     # numpy.array_split's rule
    for n in (3, 4, 7, 12):
        expected = np.array_split(data.asnumpy(), n)
        got = utils.split_data(data, n, even_split=False)
        assert len(got) == n
        for a, b in zip(got, expected):
            np.testing.assert_array_equal(a.asnumpy(), b)
    by_columns = utils.split_data(data, 3, batch_axis=1)
    assert [p.asnumpy()[:, 0].tolist() for p in by_columns] == \
        [data.asnumpy()[:, i].tolist() for i in range(3)]
    with pytest.raises(MXNetError, match=r"shape \(10, 3\) cannot be split evenly into 4 "
                                         "slices.*even_split=False"):
        utils.split_data(data, 4)
    with pytest.raises(ValueError, match="even_split=False"):   # a ValueError, as in MXNet
        utils.split_data(data, 4)


def test_split_and_load_puts_slices_on_devices(monkeypatch):
    monkeypatch.setenv("MINIGLUON_SIMULATED_GPUS", "2")
    batch = np.random.RandomState(0).rand(6, 2)
    for ctxs in ([mx.cpu(0), mx.cpu(1)], [mx.gpu(0), mx.gpu(1)]):
        parts = utils.split_and_load(batch, ctxs)
        assert [p.context for p in parts] == ctxs
        assert all(p.dtype == np.float32 for p in parts)
        np.testing.assert_allclose(np.concatenate([p.asnumpy() for p in parts]), batch,
                                   rtol=1e-6)
    single = utils.split_and_load(nd.ones((3, 2)), [mx.cpu(1)])
    assert len(single) == 1 and single[0].context == mx.cpu(1) and single[0].shape == (3, 2)
    three = utils.split_and_load(nd.ones((7, 2)), [mx.cpu(0), mx.cpu(1), mx.cpu(2)],
                                 even_split=False)
    assert [p.shape[0] for p in three] == [3, 2, 2]


def test_split_and_load_uneven_batch_error_names_sizes():
    with pytest.raises(MXNetError) as err:
        utils.split_and_load(np.zeros((7, 3)), [mx.cpu(0), mx.cpu(1)])
    msg = str(err.value)
    assert "batch of size 7" in msg and "2 contexts" in msg
    assert "even_split=False" in msg and "divisible by 2" in msg


# ---- clip_global_norm ---------------------------------------------------------------------
def test_clip_global_norm_matches_numpy():
    rng = np.random.RandomState(3)
    raw = [rng.randn(4, 3).astype(np.float32), rng.randn(5).astype(np.float32)]
    arrays = [nd.array(raw[0]), nd.array(raw[1], ctx=mx.cpu(1))]
    norm = np.sqrt(sum((r.astype(np.float64) ** 2).sum() for r in raw))
    got = utils.clip_global_norm(arrays, 1.0)
    assert isinstance(got, float)
    np.testing.assert_allclose(got, norm, rtol=1e-6)
    for arr, r in zip(arrays, raw):
        np.testing.assert_allclose(arr.asnumpy(), r / (norm + 1e-8), rtol=1e-5)
    assert arrays[1].context == mx.cpu(1)


def test_clip_global_norm_keeps_small_arrays_and_returns_ndarray():
    arrays = [nd.array([0.3, 0.4])]
    total = utils.clip_global_norm(arrays, 10.0, check_isfinite=False)
    assert isinstance(total, nd.NDArray)
    np.testing.assert_allclose(total.asnumpy(), [0.5], rtol=1e-6)
    np.testing.assert_allclose(arrays[0].asnumpy(), [0.3, 0.4], rtol=1e-7)


def test_clip_global_norm_warns_on_nan():
    with pytest.warns(UserWarning, match="NaN or infinite"):
        utils.clip_global_norm([nd.array([np.nan, 1.0])], 1.0)
    with pytest.raises(MXNetError, match="no arrays"):
        utils.clip_global_norm([], 1.0)


# ---- check_sha1 / download ----------------------------------------------------------------
@pytest.fixture
def payload(tmp_path):
    content = b"minigluon test payload\n" * 100
    src = tmp_path / "src" / "data.bin"
    src.parent.mkdir()
    src.write_bytes(content)
    return src, hashlib.sha1(content).hexdigest()


def test_check_sha1(payload):
    src, digest = payload
    assert utils.check_sha1(str(src), digest)
    assert utils.check_sha1(str(src), digest[:8])
    assert not utils.check_sha1(str(src), "0" * 40)


def test_download_file_url(payload, tmp_path):
    src, digest = payload
    url = src.as_uri()
    dest_dir = tmp_path / "dest"
    dest_dir.mkdir()
    fname = utils.download(url, path=str(dest_dir), sha1_hash=digest)
    assert fname == str(dest_dir / "data.bin")
    assert open(fname, "rb").read() == src.read_bytes()
    # an existing file with the right hash is kept; overwrite=True fetches again
    open(fname, "wb").write(b"local edit")
    assert utils.download(url, path=fname) == fname
    assert open(fname, "rb").read() == b"local edit"
    utils.download(url, path=fname, sha1_hash=digest)        # wrong hash: fetched again
    assert utils.check_sha1(fname, digest)
    open(fname, "wb").write(b"local edit")
    utils.download(url, path=fname, overwrite=True)
    assert utils.check_sha1(fname, digest)
    assert not [p for p in dest_dir.iterdir() if p.name.endswith(".part")]


def test_download_hash_mismatch_is_an_error(payload, tmp_path):
    src, _ = payload
    with pytest.raises(DownloadError, match="SHA-1 does not match"):
        utils.download(src.as_uri(), path=str(tmp_path / "x.bin"), sha1_hash="ab" * 20)


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def test_download_from_local_http_server(payload, tmp_path):
    src, digest = payload
    handler = lambda *a, **k: _Quiet(*a, directory=str(src.parent), **k)  # noqa: E731
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        fname = utils.download(f"http://127.0.0.1:{port}/data.bin",
                               path=str(tmp_path / "got.bin"), sha1_hash=digest)
        assert utils.check_sha1(fname, digest)
        with pytest.raises(DownloadError, match="HTTP 404"):
            utils.download(f"http://127.0.0.1:{port}/missing.bin",
                           path=str(tmp_path / "m.bin"), retries=1)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
    assert not thread.is_alive()


def test_download_offline_error_is_clear(tmp_path):
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()                          # nothing listens there any more
    target = tmp_path / "offline.bin"
    with pytest.raises(DownloadError) as err:
        utils.download(f"http://127.0.0.1:{port}/offline.bin", path=str(target), retries=2)
    msg = str(err.value)
    assert f"could not download http://127.0.0.1:{port}/offline.bin after 3 attempt(s)" in msg
    assert "network may be unreachable" in msg and str(target) in msg
    assert not target.exists()


def test_download_argument_errors(tmp_path):
    with pytest.raises(DownloadError, match="cannot take a file name"):
        utils.download("http://127.0.0.1:1/")
    with pytest.raises(DownloadError, match="retries must be an int >= 0"):
        utils.download("http://127.0.0.1:1/a", path=str(tmp_path), retries=-1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(DownloadError):
            utils.download("http://127.0.0.1:1/a", path=str(tmp_path), retries=0,
                           verify_ssl=False)
    assert any("verify_ssl=False" in str(w.message) for w in caught)
