"""The job's live page in a real headless Chromium (Debian's chromium and chromium-driver,
driven by Selenium with the driver's path given, so Selenium Manager never downloads one).

One real job, `minigluon-launch -n 2 -s 2 --dashboard` running tests/tools/dashboard_job.py:
the page must show both workers and both servers, and a loss curve of N points that then
grows past N; a screenshot is saved (set MINIGLUON_DASHBOARD_SCREENSHOT=PATH to keep a copy,
as docs/images/dashboard.png was made). Then the launcher is stopped with SIGTERM: the page
must say that it no longer answers, the port must be closed, and no process of the job, nor
of the browser, may be left (checked by PID).
"""
import os
import re
import shutil
import signal
import socket
import time

import psutil
import pytest

from minigluon.tools.dashboard import Dashboard
from minigluon.tools.jobstate import JobState

from launchkit import PY, running

CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")
JOB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dashboard_job.py")
DEADLINE = 60.0  # s for each thing the page must come to show; typically 1-5 s
SECRET = "a-test-secret-0123456789abcdef"

# What the page shows, read the way a person would: rows of its tables, points of a curve.
READ_PAGE = """
const rows = id => document.querySelectorAll('#' + id + ' tr[data-rank], #' + id + ' tr[data-role]');
const loss = document.querySelector('figure[data-curve="loss"]');
return {workers: rows('workers').length, servers: rows('servers').length,
        nodes: Array.from(rows('nodes')).map(r => [r.cells[0].textContent, r.dataset.state]),
        loss: loss ? Number(loss.dataset.points) : 0,
        conn: document.getElementById('conn').className,
        text: document.body.innerText.slice(0, 2000)};
"""


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """A headless Chromium under chromedriver; afterwards neither is left (by PID)."""
    missing = [name for name, path in (("chromium", CHROMIUM), ("chromedriver", CHROMEDRIVER))
               if path is None]
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        missing.append("the selenium Python package")
    if missing:
        pytest.skip(f"needs {', '.join(missing)} to test the page in a real browser; "
                    "install: apt-get install chromium chromium-driver; pip install selenium "
                    "(.ci/run does both)")
    folder = tmp_path_factory.mktemp("chromium")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--no-first-run", "--window-size=1280,820", f"--user-data-dir={folder / 'profile'}"):
        options.add_argument(arg)
    service = Service(CHROMEDRIVER, log_output=str(folder / "chromedriver.log"))
    driver = webdriver.Chrome(service=service, options=options)
    driver.set_page_load_timeout(DEADLINE)
    driver.set_script_timeout(10)
    started = [psutil.Process(service.process.pid)]
    started += started[0].children(recursive=True)
    yield driver
    driver.quit()
    deadline = time.monotonic() + 10
    while any(running(p) for p in started) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [p.pid for p in started if running(p)]
    for p in started:
        if running(p):
            p.kill()
    assert not left, f"browser processes left after quit(): {left}"


def read_page(driver):
    return driver.execute_script(READ_PAGE)


def wait_for(driver, check, what, launch=None):
    """The page's reading once `check(reading)` holds; fail after DEADLINE seconds."""
    deadline = time.monotonic() + DEADLINE
    while True:
        page = read_page(driver)
        if check(page):
            return page
        if launch is not None:
            launch.watch()
        if time.monotonic() > deadline:
            extra = launch.text()[-3000:] if launch is not None else ""
            pytest.fail(f"the page did not show {what} within {DEADLINE} s; it shows:\n"
                        f"{page['text']}\n{extra}")
        time.sleep(0.2)


@pytest.mark.timeout(180)
def test_page_of_a_running_job_shows_its_nodes_and_a_growing_curve(job, browser, tmp_path):
    launch = job(["-n", "2", "-s", "2", "--grace", "2", "--dashboard",
                  PY, JOB, "--pause", "0.05"])
    launch.wait_until(lambda: "live page at" in launch.err, DEADLINE, "the page's address")
    url = re.search(r"live page at (http://\S+)", launch.err).group(1)
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/", url)  # loopback: no token needed

    browser.get(url)
    page = wait_for(browser, lambda p: p["workers"] == 2 and p["servers"] == 2 and p["loss"] >= 3,
                    "2 workers, 2 servers and a loss curve", launch)
    assert sorted(label for label, _ in page["nodes"]) == [
        "scheduler", "server 0", "server 1", "worker 0", "worker 1"]
    grown = wait_for(browser, lambda p: p["loss"] > page["loss"],
                     f"the loss curve grow past {page['loss']} points", launch)
    assert all(state == "up" for _, state in grown["nodes"]), grown["nodes"]
    assert grown["conn"] == "live" and "samples/s" in grown["text"]
    shot = tmp_path / "dashboard.png"
    assert browser.save_screenshot(str(shot))
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    if os.environ.get("MINIGLUON_DASHBOARD_SCREENSHOT"):
        shutil.copy(shot, os.environ["MINIGLUON_DASHBOARD_SCREENSHOT"])

    launch.watch()
    os.kill(launch.proc.pid, signal.SIGTERM)
    assert launch.wait(timeout=DEADLINE) == 128 + signal.SIGTERM
    ended = wait_for(browser, lambda p: p["conn"] == "stale", "that the job no longer answers")
    assert "may have ended" in ended["text"]
    port = int(url.rsplit(":", 1)[1].strip("/"))
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    launch.assert_nothing_left()


def test_off_loopback_the_browser_keeps_the_token_in_a_cookie(browser):
    state = JobState(1, 1)
    state.feed("worker 0", {"kind": "worker", "gstep": 3, "metrics": {"loss": 0.5}})
    with Dashboard(state.snapshot, host="0.0.0.0", port=0, secret=SECRET) as board:
        local = board.url.replace(f"//{socket.gethostname()}:", "//127.0.0.1:")
        browser.get(local.split("?")[0])
        assert "needs its token" in browser.find_element("tag name", "body").text
        browser.get(local)
        # redirected to the bare address; the page's own polling then passes on the cookie
        page = wait_for(browser, lambda p: p["conn"] == "live" and p["loss"] == 1,
                        "the state fetched with the token's cookie")
        assert browser.current_url == f"http://127.0.0.1:{board.port}/"
        assert page["workers"] == 1
