"""Where each key lives: the server of a small key, the slices of a big one.

A key with at most MXNET_KVSTORE_BIGARRAY_BOUND elements (default 131072 here,
`config.kvstore_split_bound`) lives whole on one server, picked
by a hash of the key that every worker computes alike. A bigger key is cut into
`num_servers` contiguous slices of (nearly) equal size, slice i on server i. The slices of
a row_sparse key hold whole rows (`row` = the elements of one row), so that each server
owns a row range and takes the rows of a push that fall in it.

>>> plan(7, 10, num_servers=2, bound=100)         # small: one server
((1, 0, 10),)
>>> plan(7, 1001, num_servers=2, bound=1000)      # big: one slice per server
((0, 0, 500), (1, 500, 501))
>>> plan(7, 1001, num_servers=2, bound=1000, row=77)   # 13 rows: 6 and 7
((0, 0, 462), (1, 462, 539))
"""
import zlib

__all__ = ["plan", "replica_of", "server_of"]


def server_of(key, num_servers):
    """The server of a small key: a stable hash (the same in every process and run)."""
    if isinstance(key, str):
        code = zlib.crc32(key.encode("utf-8"))
    else:
        code = int(key) * 9973
    return code % num_servers


def plan(key, size, num_servers, bound, row=1):
    """((server, offset, length), ...): the parts of a flat key of `size` elements, cut
    between rows of `row` elements (1: anywhere)."""
    if size <= bound or num_servers == 1 or row == 0:
        return ((server_of(key, num_servers), 0, size),)
    rows = size // row
    cuts = [rows * i // num_servers * row for i in range(num_servers + 1)]
    return tuple((i, cuts[i], cuts[i + 1] - cuts[i]) for i in range(num_servers)
                 if cuts[i + 1] > cuts[i])


def replica_of(rank, num_servers):
    """The server that holds the copy of server `rank`'s range (replica.py)."""
    return (rank + 1) % num_servers
