"""The documentation site as a reader sees it: built with ``mkdocs build --strict``, served on a free loopback port,
every page opened in headless Chromium (Debian's ``chromium`` and ``chromium-driver``, driven through chromedriver
with selenium). No page may log a console error, and the site's search must find "checkpoint".

Marked ``browser``: left out of every run but ``make docs-check`` (pyproject.toml addopts ``-m 'not browser'``),
which installs the browser first (``scripts/setup.sh browser``).
"""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Iterator

import pytest

from .snippets import ROOT

pytestmark = pytest.mark.browser

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built from this checkout with --strict into a temporary folder."""
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def base_url(site: Path) -> Iterator[str]:
    """The site served over HTTP on a free loopback port, by a server thread stopped at the end."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Chromium through chromedriver, keeping the console's messages."""
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        pytest.fail(f"chromium or chromedriver is missing ({CHROMIUM}, {CHROMEDRIVER}): run `scripts/setup.sh "
                    f"browser` (Debian's chromium and chromium-driver), or `make docs-check`, which does")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                 "--window-size=1280,900", "--no-first-run", "--disable-extensions"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def pages(site: Path) -> list[str]:
    """Every page of the built site, as a path relative to its root (``guides/spout/``)."""
    found = [p.parent.relative_to(site).as_posix() for p in site.rglob("index.html")]
    return sorted("" if p == "." else f"{p}/" for p in found)


def console_errors(driver: Any) -> list[str]:
    return [entry["message"] for entry in driver.get_log("browser") if entry.get("level") == "SEVERE"]


def test_every_page_opens_without_a_console_error(site: Path, base_url: str, browser: Any) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    opened = pages(site)
    nav = {"", "getting-started/", "concepts/", "guides/spout/", "reference/configuration/", "reference/api/"}
    assert nav <= set(opened), f"pages missing from the site: {nav - set(opened)}"
    errors: dict[str, list[str]] = {}
    for page in opened:
        browser.get(base_url + page)
        WebDriverWait(browser, 20).until(lambda d: d.execute_script("return document.readyState") == "complete")
        assert browser.find_elements("css selector", "article h1"), f"{page}: no title in the page"
        found = console_errors(browser)
        if found:
            errors[page] = found
    assert not errors, f"console errors: {errors}"


def test_the_search_finds_checkpoint(base_url: str, browser: Any) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(base_url)
    WebDriverWait(browser, 20).until(lambda d: d.execute_script("return document.readyState") == "complete")
    browser.find_element(By.CSS_SELECTOR, "label.md-search__icon, .md-search__input").click()
    box = WebDriverWait(browser, 20).until(lambda d: d.find_element(By.CSS_SELECTOR, "input.md-search__input"))
    box.send_keys("checkpoint")
    results = WebDriverWait(browser, 30).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, ".md-search-result__item") or None,
        message="the search of the site found nothing for \"checkpoint\"")
    titles = " ".join(r.text for r in results).lower()
    assert "checkpoint" in titles, titles[:2000]
    assert not console_errors(browser)
