"""The smoke-profile book in a real browser: every page opens in headless Chromium without console
errors, every image loads, every internal link resolves. Screenshots go to artifacts/screenshots/.

Needs the Debian `chromium` package (.ci/run installs it); the test fails, not skips, without it.
"""
from __future__ import annotations

import functools
import http.server
import shutil
import threading
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urldefrag

import pytest

from book_helpers import build_log, smoke_book
from headlib import book

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--headless"]
SCREENSHOTS = book.REPO / "artifacts" / "screenshots"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The built smoke book served on 127.0.0.1 (a free port) by http.server in a thread."""
    smoke = smoke_book(tmp_path_factory)
    assert smoke.build.returncode == 0, build_log(smoke)

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(smoke.html)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", smoke.html
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).is_file() and not shutil.which("chromium"):
        pytest.fail(f"Chromium not found at {CHROMIUM}: install the Debian package (apt-get install -y chromium; "
                    ".ci/run does this). Do not use `playwright install`.")
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM if Path(CHROMIUM).is_file() else shutil.which("chromium"),
                              args=CHROMIUM_ARGS)
        yield b
        b.close()


def pages(html: Path) -> list[str]:
    """Every HTML page of the site (not the theme's static files or copied sources)."""
    skip = {"_static", "_sources", "_images", "_sphinx_design_static"}
    return sorted(p.relative_to(html).as_posix() for p in html.rglob("*.html")
                  if not skip & set(p.relative_to(html).parts))


def status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def test_every_page_renders_cleanly(site, browser):
    base, html = site
    names = pages(html)
    assert {"intro.html", "reproduce.html", "executed/en-de/seed1/03_data_and_models.html"} <= set(names)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    problems, links, images = [], set(), 0
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("console", lambda m: m.type == "error" and errors.append(f"console: {m.text}"))
    page.on("pageerror", lambda e: errors.append(f"uncaught: {e}"))
    page.on("requestfailed", lambda r: errors.append(f"request failed: {r.url} ({r.failure})"))
    for name in names:
        errors.clear()
        if 'http-equiv="refresh"' in (html / name).read_text().lower():   # index.html -> the root page
            page.goto(f"{base}/{name}")
            page.wait_for_url(lambda url: not url.endswith("/" + name), timeout=15_000)
            page.wait_for_load_state("networkidle")
            problems += [f"{name}: {e}" for e in errors]
            continue
        page.goto(f"{base}/{name}", wait_until="load")
        # load lazy images too, then wait until every image has finished (or failed) loading
        page.evaluate("document.querySelectorAll('img[loading=lazy]').forEach(i => i.loading = 'eager')")
        page.wait_for_function("Array.from(document.images).every(i => i.complete)", timeout=15_000)
        page.wait_for_load_state("networkidle")
        if page.locator("main").count() and "{glue" in page.inner_text("main"):
            problems.append(f"{name}: a glue role is shown as text, not filled in")
        for img in page.eval_on_selector_all("img", "els => els.map(e => [e.currentSrc || e.src, e.naturalWidth])"):
            images += 1
            if not img[1] > 0:
                problems.append(f"{name}: image not loaded: {img[0]}")
        for href in page.eval_on_selector_all("a[href]", "els => els.map(e => e.href)"):
            if href.startswith(base):
                links.add(urldefrag(href)[0])
        page.screenshot(path=str(SCREENSHOTS / f"smoke-{name.replace('/', '_').removesuffix('.html')}.png"),
                        full_page=True)
        problems += [f"{name}: {e}" for e in errors]
    page.close()
    assert images > 0, "the smoke book should show at least one figure"
    for url in sorted(links):
        code = status(url)
        if code != 200:
            problems.append(f"link {url} -> HTTP {code}")
    assert not problems, "\n".join(problems)


def test_glued_numbers_are_filled_in(site, browser):
    """The intro's numbers come from the chapter's executed notebook: none is left empty."""
    base, _ = site
    page = browser.new_page()
    page.goto(f"{base}/intro.html", wait_until="load")
    text = page.inner_text("main")
    assert "{glue" not in text
    assert "29,000" in text                               # Multi30k training pairs, glued with :,d
    pasted = page.eval_on_selector_all(".pasted-text", "els => els.map(e => e.textContent.trim())")
    assert len(pasted) >= 10 and all(pasted), pasted
    assert sum(any(ch.isdigit() for ch in p) for p in pasted) >= 8, pasted
    page.goto(f"{base}/executed/en-de/seed1/03_data_and_models.html", wait_until="load")
    assert page.locator("table").count() >= 5           # config, sizes, domains, corpus, BLEU, training
    assert page.locator("figure img").count() >= 1      # the dev-BLEU curve
    page.close()


def test_head_view_draws_and_follows_its_selectors(site, browser):
    """The Sec. 5 head view: lines drawn on load, redrawn for another head, filtered on hover."""
    base, _ = site
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{base}/executed/en-de/seed1/05_head_functions.html", wait_until="load")
    view = page.locator(".headview").first
    lines = lambda: view.locator("svg line").count()   # noqa: E731
    assert lines() > 0
    tokens = view.locator("svg text").count()
    assert tokens >= 4 and tokens % 2 == 0              # every token on both sides
    view.locator("select[name=head]").select_option("1")
    view.locator("select[name=layer]").select_option("1")
    assert lines() > 0
    everything = lines()
    view.locator("svg text").first.hover()
    assert 0 < lines() <= everything                     # only the hovered query's lines
    assert not errors, errors
    page.close()
