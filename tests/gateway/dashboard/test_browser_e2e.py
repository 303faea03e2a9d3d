"""The dashboard in headless Chromium against a real gateway: it loads from the gateway
alone, and its figures move while boto3 writes a burst.

``SQUALL_DASHBOARD_SCREENSHOT=docs/images/dashboard.png`` (scripts/dashboard-screenshot.sh)
saves the final screenshot there for the docs.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import make_client
from tests.support.server import SquallProcess

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
        assert browser.find_element("id", "connection").text == "disconnected"
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
