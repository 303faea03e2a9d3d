"""The dashboard in headless Chromium against a real gateway: it loads from the gateway
alone, and its figures move while boto3 writes a burst.

``SQUALL_DASHBOARD_SCREENSHOT=docs/images/dashboard.png`` (scripts/dashboard-screenshot.sh)
saves the final screenshot there for the docs.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import make_client
from tests.support.server import SquallProcess, free_port

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
MB = 1_000_000
# A backend of 4 MB/s: a burst of 24 MB stays dirty for a few seconds. Elastic mode: the
# burst attaches a cache volume (the volumes panel).
GATEWAY = ["--workers", "1", "--cache-mode", "elastic", "--cache-size", "64MiB",
           "--backend-bandwidth", "4MB/s", "--cache-volume-bandwidth", "200MB/s",
           "--inactivity-delay", "1", "--cost-backend-size-gb", "1"]

pytestmark = pytest.mark.skipif(
    CHROMIUM is None or CHROMEDRIVER is None,
    reason="headless browser test: Debian packages chromium and chromium-driver are not "
           "installed (scripts/test.sh installs them)")


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[SquallProcess]:
    server = SquallProcess(tmp_path / "data", GATEWAY).start()
    yield server
    assert server.stop() == 0, server.log()


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1400,1250", "--hide-scrollbars",
                f"--user-data-dir={tmp_path / 'chromium'}"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def value(driver: Any, element_id: str) -> float | None:
    raw = driver.find_element("id", element_id).get_attribute("data-value")
    return float(raw) if raw not in (None, "") else None


def wait_for(check: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_page_loads_offline_and_numbers_move_during_a_burst(
        gateway: SquallProcess, browser: Any, tmp_path: Path) -> None:
    browser.get(f"{gateway.endpoint}/_squall/ui")
    wait_for(lambda: browser.find_element("id", "connection").text == "live", "first poll")
    assert value(browser, "dirty-bytes") == 0
    wait_for(lambda: value(browser, "ingest-rate") == 0, "a measured, idle ingest rate")
    # Everything the page loaded came from the gateway itself.
    origin = gateway.endpoint + "/"
    loaded = browser.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name)")
    assert loaded and all(url.startswith(origin) for url in loaded), loaded
    assert browser.execute_script("return typeof uPlot") == "function"

    s3 = make_client(gateway.endpoint)
    s3.create_bucket(Bucket="ckpt")
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda i: s3.put_object(Bucket="ckpt", Key=f"rank-{i}/step-1",
                                              Body=os.urandom(3 * MB)), range(8)))
    for key in ("rank-9/step-1", "rank-10/step-1"):  # two errors for the errors panel
        with pytest.raises(s3.exceptions.NoSuchKey):
            s3.get_object(Bucket="ckpt", Key=key)

    wait_for(lambda: (value(browser, "dirty-bytes") or 0) > 0, "dirty bytes to rise")
    wait_for(lambda: (value(browser, "ingest-rate") or 0) > 0, "the ingest rate to rise")
    wait_for(lambda: "NoSuchKey" in browser.find_element("id", "errors").text,
             "the errors panel")
    assert value(browser, "errors-total") == 2
    assert browser.find_element("id", "panel-volumes").is_displayed()  # elastic
    assert browser.find_element("id", "panel-cost").is_displayed()
    wait_for(lambda: (value(browser, "flush-rate") or 0) > 0, "flushing to show")
    time.sleep(2)  # a few more points on the charts for the screenshot
    shot = tmp_path / "dashboard.png"
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
    if target := os.environ.get("SQUALL_DASHBOARD_SCREENSHOT"):
        shutil.copyfile(shot, target)
    logs = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert not logs, logs  # no script errors, nothing refused by the page's CSP


def test_a_closed_gateway_asks_for_the_status_token(tmp_path: Path, browser: Any) -> None:
    token = "dashboard-token-0123456789"
    server = SquallProcess(tmp_path / "closed", env={"SQUALL_STATUS_TOKEN": token},
                           public_status=False).start()
    try:
        browser.get(f"{server.endpoint}/_squall/ui")
        form = browser.find_element("id", "login")
        wait_for(form.is_displayed, "the token form")
        wait_for(lambda: browser.find_element("id", "connection").text == "not authorised",
                 "what the page lacks")
        assert "Not authorised" in browser.find_element("id", "login-message").text
        browser.find_element("id", "token").send_keys("not-the-token")
        browser.find_element("css selector", "#login button").click()
        wait_for(lambda: "refused" in browser.find_element("id", "login-message").text,
                 "the refusal")
        browser.find_element("id", "token").send_keys(token)
        browser.find_element("css selector", "#login button").click()
        wait_for(lambda: browser.find_element("id", "connection").text == "live",
                 "the data with the token")
        assert not form.is_displayed()
        assert token not in browser.current_url
    finally:
        assert server.stop() == 0, server.log()


def test_the_readme_start_ends_with_the_dashboard_open(tmp_path: Path, browser: Any) -> None:
    """README's first command on a fresh directory: ``squall serve`` with no setting (but
    a free port: 9000 may be taken here). Its banner prints the dashboard's address with
    a token for this run; opened as printed, the page shows the gateway's figures."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SQUALL_", "AWS_"))}
    proc = subprocess.Popen([sys.executable, "-m", "gateway.commands.cli", "serve",
                             "--listen", f"127.0.0.1:{port}"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        banner: list[str] = []
        while not any("secret key:" in line for line in banner):  # generated: a fresh start
            line = proc.stdout.readline()
            assert line, "".join(banner)
            banner.append(line)
        # the rest of its output is read on (a full pipe would stop the gateway)
        rest = threading.Thread(target=proc.stdout.read, daemon=True)
        rest.start()
        url = next(line for line in banner if "dashboard:" in line).split()[1]
        assert url.startswith(f"http://127.0.0.1:{port}/_squall/ui#token="), banner
        ready = SquallProcess(tmp_path / "squall-data", port=port)
        wait_for(lambda: _healthy(ready), "the gateway to be ready", timeout=120)
        browser.get(url)
        wait_for(lambda: browser.find_element("id", "connection").text == "live",
                 "the data, with the printed token", timeout=120)
        assert value(browser, "dirty-bytes") == 0
        assert "posix" in browser.find_element("id", "backend").text
        assert not browser.find_element("id", "login").is_displayed()
        assert "token" not in browser.current_url  # moved out of the address bar
        shot = tmp_path / "readme-dashboard.png"
        assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
        # a tab without the token is told what it lacks
        browser.execute_script("sessionStorage.clear()")
        browser.get(url.split("#")[0])
        wait_for(lambda: browser.find_element("id", "connection").text == "not authorised",
                 "the page to say it is not authorised", timeout=120)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0


def _healthy(server: SquallProcess) -> bool:
    try:
        return httpx.get(f"{server.endpoint}/_squall/health", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False
