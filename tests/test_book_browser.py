"""The smoke-profile book in a real browser: every page opens in headless Chromium without console
errors, every image loads, every internal link resolves. Screenshots go to artifacts/screenshots/.

Needs the Debian `chromium` package (`make test` installs it as root); the test fails, not skips, without it.
"""
from __future__ import annotations

import pytest
from book_helpers import build_log, smoke_book

from headlib.book import browse
from headlib.settings import settings


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The built smoke book served on 127.0.0.1: (base URL, html directory)."""
    smoke = smoke_book(tmp_path_factory)
    assert smoke.build.returncode == 0, build_log(smoke)
    with browse.serve(smoke.html) as base:
        yield base, smoke.html


@pytest.fixture(scope="module")
def browser():
    try:
        with browse.chromium() as b:
            yield b
    except FileNotFoundError as e:
        pytest.fail(str(e))


def test_every_page_renders_cleanly(site, browser):
    base, html = site
    report = browse.check_site(browser, base, html, settings().artifacts / "screenshots", prefix="smoke-")
    assert {"intro.html", "reproduce.html", "executed/en-de/seed1/03_data_and_models.html"} <= set(report.pages)
    assert report.images > 0, "the smoke book should show at least one figure"
    assert report.links > len(report.pages) / 2
    assert len(report.screenshots) == len(report.pages) - 1 and all(p.stat().st_size for p in report.screenshots)
    assert not report.problems, "\n".join(report.problems)


def test_the_check_reports_what_is_broken(tmp_path, browser):
    """A hand-made site with one good page and one with a missing image, a dead link, a script
    error and a glue role left as text: each is reported, the good page is clean."""
    import matplotlib.pyplot as plt
    plt.imsave(tmp_path / "ok.png", [[0.0, 1.0], [1.0, 0.0]])
    (tmp_path / "index.html").write_text('<meta http-equiv="refresh" content="0; url=good.html">')
    (tmp_path / "good.html").write_text('<main><p>fine</p><img src="ok.png"><a href="bad.html">next</a></main>')
    (tmp_path / "bad.html").write_text('<main><p>{glue:text}`x`</p><img src="missing.png">'
                                       '<a href="gone.html">dead</a><script>undefinedCall()</script></main>')
    with browse.serve(tmp_path) as base:
        report = browse.check_site(browser, base, tmp_path, tmp_path / "shots")
    assert report.pages == ["bad.html", "good.html", "index.html"] and report.images == 2
    text = "\n".join(report.problems)
    assert "bad.html: a glue role is shown as text" in text
    assert "bad.html: image not loaded" in text and "missing.png" in text
    assert "bad.html: uncaught" in text and "undefinedCall" in text
    assert "gone.html -> HTTP 404" in text
    assert not [p for p in report.problems if p.startswith(("good.html", "index.html"))], report.problems
    assert sorted(p.name for p in report.screenshots) == ["bad.png", "good.png"]


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


def test_browse_names_a_missing_build(tmp_path, capsys):
    assert browse.main(["--html", str(tmp_path / "nowhere")]) == 1
    err = capsys.readouterr().err
    assert "no built book in" in err and "nowhere" in err and "jupyter-book build" in err
