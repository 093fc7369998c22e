"""Message authentication of the distributed kvstore: an HMAC-SHA256 tag on every message
when the job has a secret (MINIGLUON_PS_SECRET).

The tag is one extra frame after the payload (the header's AUTH flag says it is there):
16 bytes of job nonce, then HMAC-SHA256 under a key derived from the secret, over

    direction (to a ROUTER / to a DEALER) | the DEALER's identity | the nonce |
    every frame (header and payloads), each preceded by its length.

The header holds the command, key, request id and sender rank, so a tag pins all of them;
the DEALER identity (a per-process random name) binds the message to one connection; the
nonce is the scheduler's per-job token, so a request recorded in one job is refused in
another that uses the same secret. A REGISTER, sent before its node knows the token, has
an all-zero nonce; a ROUTER accepts that nonce for REGISTER only. Replays inside a job meet
the duplicate filter (resender.py): they get the cached reply or nothing, never a second
application.

What is not covered: the bytes of shared-memory segments (only their names travel in
messages; segments are files of mode 0600 with 128-bit random names, created and read by
processes of the same user on the same host), and confidentiality (values travel in clear;
see docs/kvstore-security.md).

>>> auth = Auth(b"a long random secret")
>>> frames = msg.encode()                       # msg.flags has Flag.AUTH set
>>> frames.append(auth.tag(frames, b"worker-a", to_router=True))
>>> auth.check(frames[:-1], frames[-1], b"worker-a", to_router=True) == auth.nonce
True
"""
import hashlib
import hmac
import struct

__all__ = ["Auth", "NONCE_BYTES", "TAG_BYTES", "ZERO_NONCE"]

NONCE_BYTES = 16
MAC_BYTES = 32
TAG_BYTES = NONCE_BYTES + MAC_BYTES
ZERO_NONCE = bytes(NONCE_BYTES)
_DOMAIN = b"minigluon-ps/1 message"
_LEN = struct.Struct("<Q")


def _buffer(frame):
    if hasattr(frame, "buffer"):                 # a received zmq.Frame
        return frame.buffer
    return memoryview(frame).cast("B")          # bytes, or a (contiguous) NumPy array


class Auth:
    """Tags and checks messages with the job's secret.

    `nonce` is what this node puts in the tags it makes: zeros until it knows the job's
    token (`Van.set_job_nonce`), then the token.
    """

    def __init__(self, secret):
        self._key = hmac.new(secret, _DOMAIN, hashlib.sha256).digest()
        self.nonce = ZERO_NONCE

    def _mac(self, frames, identity, to_router, nonce):
        mac = hmac.new(self._key, digestmod=hashlib.sha256)
        mac.update(b"Q" if to_router else b"R")
        mac.update(_LEN.pack(len(identity)) + identity + nonce)
        for frame in frames:
            buf = _buffer(frame)
            mac.update(_LEN.pack(buf.nbytes))
            mac.update(buf)
        return mac.digest()

    def tag(self, frames, identity, to_router, nonce=None):
        """The tag frame of `frames` (header first) sent over the connection of DEALER
        `identity`, toward its ROUTER or from it."""
        nonce = self.nonce if nonce is None else nonce
        return nonce + self._mac(frames, identity, to_router, nonce)

    def check(self, frames, tag, identity, to_router):
        """The nonce of a valid tag, or None when the tag does not match the frames."""
        tag = bytes(_buffer(tag))
        if len(tag) != TAG_BYTES:
            return None
        nonce, mac = tag[:NONCE_BYTES], tag[NONCE_BYTES:]
        if hmac.compare_digest(mac, self._mac(frames, identity, to_router, nonce)):
            return nonce
        return None
