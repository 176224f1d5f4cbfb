"""A built book in headless Chromium: every page opens without console errors, every image loads,
every internal link resolves, no glue role is left as text; a full-page screenshot of each page.

    python -m headlib.book.browse [--html _build/html] [--screenshots artifacts/screenshots] [--prefix cpu]

The tests run the same check on the smoke book (tests/test_book_browser.py). Needs the Debian
`chromium` package (`apt-get install -y chromium`; `make test` installs it as root), never `playwright install`.
The book is served over http on 127.0.0.1: file:// URLs give missing-resource console errors.
"""
from __future__ import annotations

import argparse
import functools
import http.server
import shutil
import sys
import threading
import urllib.error
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urldefrag

from headlib.settings import settings

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--headless"]


@contextmanager
def serve(html: Path):
    """The site in `html` served on 127.0.0.1 (a free port) by http.server in a thread: its base URL."""
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    class Server(http.server.ThreadingHTTPServer):
        def handle_error(self, request, client_address):   # the browser closing a connection early
            if not isinstance(sys.exc_info()[1], ConnectionError):
                super().handle_error(request, client_address)

    server = Server(("127.0.0.1", 0), functools.partial(Quiet, directory=str(html)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def chromium():
    """A headless Debian Chromium driven by Playwright."""
    exe = CHROMIUM if Path(CHROMIUM).is_file() else shutil.which("chromium")
    if exe is None:
        raise FileNotFoundError(f"Chromium not found at {CHROMIUM}: install the Debian package (apt-get install -y "
                                "chromium; `make test` does this as root). Do not use `playwright install`.")
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


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


@dataclass
class Report:
    pages: list[str]
    images: int = 0                                         # <img> elements seen, over all pages
    links: int = 0                                          # distinct internal links checked
    problems: list[str] = field(default_factory=list)       # "page: what", empty when all is well
    screenshots: list[Path] = field(default_factory=list)


def check_site(browser, base: str, html: Path, screenshots: Path | None = None, prefix: str = "") -> Report:
    """Open every page of the site served at `base` (from `html`) and report what is wrong."""
    report, links = Report(pages(html)), set()
    if screenshots:
        screenshots.mkdir(parents=True, exist_ok=True)
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("console", lambda m: m.type == "error" and errors.append(f"console: {m.text}"))
    page.on("pageerror", lambda e: errors.append(f"uncaught: {e}"))
    page.on("requestfailed", lambda r: errors.append(f"request failed: {r.url} ({r.failure})"))
    for name in report.pages:
        errors.clear()
        if 'http-equiv="refresh"' in (html / name).read_text().lower():   # index.html -> the root page
            page.goto(f"{base}/{name}")
            page.wait_for_url(lambda url: not url.endswith("/" + name), timeout=15_000)
            page.wait_for_load_state("networkidle")
            report.problems += [f"{name}: {e}" for e in errors]
            continue
        page.goto(f"{base}/{name}", wait_until="load")
        # load lazy images too, then wait until every image has finished (or failed) loading
        page.evaluate("document.querySelectorAll('img[loading=lazy]').forEach(i => i.loading = 'eager')")
        page.wait_for_function("Array.from(document.images).every(i => i.complete)", timeout=15_000)
        page.wait_for_load_state("networkidle")
        if page.locator("main").count() and "{glue" in page.inner_text("main"):
            report.problems.append(f"{name}: a glue role is shown as text, not filled in")
        for src, width in page.eval_on_selector_all("img", "els => els.map(e => [e.currentSrc || e.src, e.naturalWidth])"):
            report.images += 1
            if not width > 0:
                report.problems.append(f"{name}: image not loaded: {src}")
        links |= {urldefrag(href)[0] for href in page.eval_on_selector_all("a[href]", "els => els.map(e => e.href)")
                  if href.startswith(base)}
        if screenshots:
            shot = screenshots / f"{prefix}{name.replace('/', '_').removesuffix('.html')}.png"
            page.screenshot(path=str(shot), full_page=True)
            report.screenshots.append(shot)
        report.problems += [f"{name}: {e}" for e in errors]
    page.close()
    report.links = len(links)
    report.problems += [f"link {url} -> HTTP {code}" for url in sorted(links) if (code := status(url)) != 200]
    return report


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m headlib.book.browse", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--html", default=str(settings().root / "_build" / "html"), help="the built site (default: _build/html)")
    ap.add_argument("--screenshots", default=str(settings().artifacts / "screenshots"), help="where the full-page screenshots go")
    ap.add_argument("--prefix", default="", help="prefix of the screenshot file names")
    args = ap.parse_args(argv)
    html = Path(args.html)
    if not (html / "index.html").is_file():
        print(f"error: no built book in {html} (no index.html); build it first: "
              "jupyter-book build book/ -W -n --keep-going", file=sys.stderr)
        return 1
    with serve(html) as base, chromium() as browser:
        report = check_site(browser, base, html, Path(args.screenshots), args.prefix)
    print(f"{len(report.pages)} pages, {report.images} images, {report.links} internal links; "
          f"screenshots in {args.screenshots}")
    for p in report.problems:
        print(p, file=sys.stderr)
    return 1 if report.problems else 0


if __name__ == "__main__":
    sys.exit(main())
