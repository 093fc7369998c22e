"""The small parts of a restarted scheduler's rebuild, in one process: who is missing,
which ranks a node may take back, requests kept for nodes not back yet, and the launcher's
variables that tell a restarted scheduler the job's token and its finished workers."""
import pytest

from minigluon import config
from minigluon.config import ConfigError
from minigluon.kvstore.rejoin import Rebuild
from minigluon.kvstore.wire import Cmd, Message


class Node:
    def __init__(self, role, rank):
        self.role, self.rank = role, rank


def test_missing_names_every_rank_not_back_yet_but_the_finished_workers():
    rebuild = Rebuild({"worker": 3, "server": 2}, finished={2}, timeout=60)
    nodes = [Node("worker", 1), Node("server", 1), Node("worker", 2)]   # 2: placeholder
    assert rebuild.missing(nodes) == ["worker 0", "server 0"]
    nodes += [Node("worker", 0), Node("server", 0)]
    assert rebuild.missing(nodes) == []


def test_a_node_may_take_back_only_a_free_rank_of_its_role():
    rebuild = Rebuild({"worker": 2, "server": 1}, finished={1}, timeout=60)
    nodes = [Node("server", 0)]
    assert rebuild.rank_problem("worker", 0, nodes) is None
    assert "another server holds rank 0" in rebuild.rank_problem("server", 0, nodes)
    assert "rank 2 is not a worker rank of this job (0..1)" in \
        rebuild.rank_problem("worker", 2, nodes)
    assert "worker 1 had finished" in rebuild.rank_problem("worker", 1, nodes)


def test_requests_of_a_node_not_back_wait_in_arrival_order():
    rebuild = Rebuild({"worker": 2, "server": 1}, finished=(), timeout=60)
    first, second = Message(Cmd.BARRIER, req=4), Message(Cmd.FINALIZE, req=5)
    rebuild.defer(b"w0", first)
    rebuild.defer(b"w1", Message(Cmd.BARRIER, req=2))
    rebuild.defer(b"w0", second)
    assert rebuild.take(b"w0") == [first, second]
    assert rebuild.take(b"w0") == []
    assert [m.req for m in rebuild.take(b"w1")] == [2]


def test_the_launchers_restart_variables_are_checked(monkeypatch):
    monkeypatch.delenv("MINIGLUON_JOB_TOKEN", raising=False)
    monkeypatch.delenv("MINIGLUON_FINISHED_WORKERS", raising=False)
    assert config.job_token() is None and config.finished_workers() == frozenset()
    monkeypatch.setenv("MINIGLUON_JOB_TOKEN", "00112233445566778899aabbccddeeff")
    assert config.job_token() == bytes.fromhex("00112233445566778899aabbccddeeff")
    monkeypatch.setenv("MINIGLUON_JOB_TOKEN", "abc")
    with pytest.raises(ConfigError, match="MINIGLUON_JOB_TOKEN must be 32 hex digits, got "
                                          "'abc'"):
        config.job_token()
    monkeypatch.setenv("MINIGLUON_FINISHED_WORKERS", "0, 3")
    assert config.finished_workers() == {0, 3}
    monkeypatch.setenv("MINIGLUON_FINISHED_WORKERS", "one")
    with pytest.raises(ConfigError, match="MINIGLUON_FINISHED_WORKERS must be worker ranks "
                                          "separated by commas, e.g. '0,3', got 'one'"):
        config.finished_workers()
