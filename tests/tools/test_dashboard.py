"""The job's live page (minigluon/tools/dashboard.py) over real HTTP on 127.0.0.1: the JSON
API, read-only methods, the token off loopback (query once, then a cookie), and a server
that is gone, port and thread, once closed; then minigluon-launch --dashboard with stub
roles: the page serves while the job runs and its port is closed when the job has ended.
The page in a browser: test_dashboard_browser.py.
"""
import http.client
import json
import math
import re
import re
import socket

import pytest

from minigluon.tools import LaunchError
from minigluon.tools.dashboard import Dashboard, parse_address, token_for
from minigluon.tools.launch import main, parse_args

SECRET = "s3cret-of-this-test-job-0123456789"


def state(step=3):
    return {"time": 1.0, "elapsed_s": 2.5, "num_workers": 2, "num_servers": 1,
            "progress": {"epoch": 1, "epochs": 2, "step": step, "steps_per_epoch": 10,
                         "samples_per_s": 100.0, "eta_s": math.inf, "slowest_worker": 1},
            "nodes": [{"label": "worker 0", "role": "worker", "rank": 0, "host": "h",
                       "pid": 10, "state": "up", "last_heartbeat_age_s": 0.2}],
            "workers": [{"rank": 0, "epoch": 1, "step": step, "step_time_s": math.nan,
                         "samples_per_s": None, "straggler": False}],
            "servers": [{"rank": 0, "push_bytes": 5, "pull_bytes": 6,
                         "push_bytes_per_s": 1.5, "pull_bytes_per_s": None}],
            "curves": {"loss": [[s, 1.0 / (s + 1)] for s in range(step)]}}


def request(port, method="GET", path="/", headers=None):
    """(status, headers, body) of one request to 127.0.0.1:`port`, redirects not followed."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path, headers=headers or {})
        answer = conn.getresponse()
        return answer.status, dict(answer.getheaders()), answer.read()
    finally:
        conn.close()


@pytest.fixture
def board():
    steps = iter(range(3, 1000))
    with Dashboard(lambda: state(next(steps))) as served:
        yield served


def test_state_is_the_snapshot_as_json_with_nonfinite_numbers_as_null(board):
    status, headers, body = request(board.port, path="/api/state")
    assert status == 200 and headers["Content-Type"] == "application/json"
    got = json.loads(body)
    want = state(3)
    want["progress"]["eta_s"] = None
    want["workers"][0]["step_time_s"] = None
    assert got == json.loads(json.dumps(want))  # tuples and lists alike
    assert json.loads(request(board.port, path="/api/state")[2])["progress"]["step"] == 4  # live


def test_page_is_one_self_contained_document(board):
    status, headers, body = request(board.port)
    page = body.decode()
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert "default-src 'none'" in headers["Content-Security-Policy"]
    assert 'fetch("api/state"' in page
    # nothing loaded from elsewhere: no src or href attributes, no URL but SVG's namespace
    assert not re.search(r"\b(src|href)\s*=", page)
    assert re.findall(r"https?://[^\s\"']+", page) == ["http://www.w3.org/2000/svg"]
    assert request(board.port, path="/nothing")[0] == 404


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH"])
def test_page_is_read_only(board, method):
    status, headers, body = request(board.port, method, "/api/state")
    assert status == 405 and headers["Allow"] == "GET, HEAD"
    assert b"read-only" in body
    assert request(board.port, "HEAD", "/api/state")[0] == 200


def test_loopback_page_refuses_a_foreign_host_name(board):
    # a web page elsewhere that rebinds its own name to 127.0.0.1 sends its name as Host
    status, _, body = request(board.port, headers={"Host": f"attacker.example:{board.port}"})
    assert status == 403 and b"loopback" in body
    assert request(board.port, headers={"Host": f"localhost:{board.port}"})[0] == 200
    assert board.token is None and "token" not in board.url


def test_off_loopback_every_request_needs_the_token_then_kept_in_a_cookie():
    token = token_for(SECRET)
    with Dashboard(state, host="0.0.0.0", port=0, secret=SECRET) as board:
        assert board.token == token and SECRET not in board.url
        assert board.url.endswith(f":{board.port}/?token={token}")
        for path in ("/", "/api/state", f"/api/state?token={'0' * 64}"):
            status, _, body = request(board.port, path=path)
            assert status == 403 and b"token" in body, path
        assert request(board.port, "POST", f"/?token={token}")[0] == 405

        status, headers, _ = request(board.port, path=f"/?token={token}")
        assert status == 303 and headers["Location"] == "/"  # the token leaves the URL
        cookie = headers["Set-Cookie"].split(";")[0]
        assert cookie == f"minigluon_dashboard_{board.port}={token}"
        assert "HttpOnly" in headers["Set-Cookie"]
        assert request(board.port, headers={"Cookie": cookie})[0] == 200
        status, _, body = request(board.port, path="/api/state", headers={"Cookie": f"a=b; {cookie}"})
        assert status == 200 and json.loads(body)["num_workers"] == 2
        wrong = f"minigluon_dashboard_{board.port}={token_for('another-secret-0123456789')}"
        assert request(board.port, headers={"Cookie": wrong})[0] == 403


def test_off_loopback_without_a_secret_is_refused():
    with pytest.raises(LaunchError, match="needs the job's secret"):
        Dashboard(state, host="0.0.0.0", port=0, secret=None)


def test_a_failing_snapshot_is_a_500_the_page_can_show():
    def broken():
        raise RuntimeError("no state yet")
    with Dashboard(broken) as board:
        status, _, body = request(board.port, path="/api/state")
    assert status == 500 and json.loads(body) == {"error": "RuntimeError: no state yet"}


def test_close_stops_the_thread_and_frees_the_port():
    board = Dashboard(state).start()
    assert request(board.port, path="/api/state")[0] == 200
    board.close()
    assert not board._thread.is_alive()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", board.port), timeout=5).close()
    with socket.socket() as again:  # as the server itself would rebind it
        again.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        again.bind(("127.0.0.1", board.port))


def test_a_port_in_use_is_a_clear_error(board):
    with pytest.raises(LaunchError, match=rf"127\.0\.0\.1:{board.port}: cannot listen there"):
        Dashboard(state, port=board.port)


def test_address_forms_and_errors():
    assert parse_address("8080") == ("127.0.0.1", 8080)
    assert parse_address("0.0.0.0:0") == ("0.0.0.0", 0)
    assert parse_address("localhost:9000") == ("localhost", 9000)
    assert parse_address("[::1]:9000") == ("::1", 9000)
    with pytest.raises(LaunchError, match=r"--dashboard 'host': expected \[HOST:\]PORT"):
        parse_address("host")
    with pytest.raises(LaunchError, match="from 0 to 65535, got 70000"):
        parse_address("70000")
    with pytest.raises(LaunchError, match="cannot resolve 'no-such-host.invalid'"):
        Dashboard(state, host="no-such-host.invalid", port=0)


def test_dashboard_option_forms():
    def parsed(*argv):
        args = parse_args(["-n", "2", *argv])
        return args.dashboard, args.command
    assert parsed("python", "t.py") == (None, ["python", "t.py"])
    # the optional value is taken only when it is an address, else it is the command
    assert parsed("--dashboard", "python", "t.py") == ("127.0.0.1:0", ["python", "t.py"])
    assert parsed("--dashboard", "8080", "python", "t.py") == ("8080", ["python", "t.py"])
    assert parsed("--dashboard=0.0.0.0:0", "python t.py") == ("0.0.0.0:0", ["python t.py"])
    assert parsed("--dashboard", "--", "python", "t.py") == ("127.0.0.1:0", ["python", "t.py"])
    assert parsed("python", "t.py", "--dashboard") == (None, ["python", "t.py", "--dashboard"])


@pytest.mark.timeout(120)
def test_launcher_serves_the_page_for_the_jobs_lifetime_only(job, tmp_path):
    # stub roles (launchkit.STUB): the workers run until the page has been read
    read = tmp_path / "page-read"
    run = job(["-n", 2, "-s", 1, *job.roles, "--env", f"STUB_WORKER=until:{read}",
               "--dashboard", job.stub])
    run.wait_until(lambda: "live page at" in run.err, 30, "the page's address")
    port = int(re.search(r"live page at http://127\.0\.0\.1:(\d+)/\n", run.err).group(1))
    status, _, body = request(port, path="/api/state")
    assert status == 200
    got = json.loads(body)
    assert (got["num_workers"], got["num_servers"]) == (2, 1)
    assert [n["label"] for n in got["nodes"]] == ["scheduler", "server 0", "worker 0", "worker 1"]
    read.touch()
    assert run.wait(timeout=60) == 0, run.text()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    run.assert_nothing_left()


def test_launch_with_a_taken_dashboard_port_starts_nothing(board, capsys):
    code = main(["-n", "1", "--dashboard", str(board.port), "python", "-c", "pass"])
    err = capsys.readouterr().err
    assert code == 2
    assert f"--dashboard 127.0.0.1:{board.port}: cannot listen there" in err
