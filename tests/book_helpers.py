"""The smoke-profile book, built once per test session and shared by test_book.py and
test_book_browser.py (a module-level cache, since both modules import this one)."""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import headlib.book as book
from headlib.settings import settings


@dataclass
class SmokeBook:
    out: Path                 # the book directory (sources, executed/, _toc.yml, _build/)
    results: list             # the runner's TaskResults of the first run
    build: object             # subprocess.CompletedProcess of the strict jupyter-book build
    run_seconds: float
    build_seconds: float
    book_src_changed: list    # files under book/ (the committed cpu book) that the run touched

    @property
    def html(self) -> Path:
        return self.out / "_build" / "html"


_CACHE: dict[str, SmokeBook] = {}


def smoke_book(tmp_path_factory) -> SmokeBook:
    """Run the book runner for the smoke profile (en-de, seed 1) into a temporary book directory
    (HEADLIB_ARTIFACTS is the session's temporary artifacts, see conftest.py), then build it
    strictly. Never touches book/ or the repository's artifacts/."""
    if "smoke" not in _CACHE:
        out = tmp_path_factory.mktemp("book-smoke")
        before = _stamps(settings().book)
        t0 = time.time()
        results = book.run("smoke", ["en-de"], [1], out, progress=False, log=lambda msg: print(msg, flush=True))
        t1 = time.time()
        build = book.build(out)
        after = _stamps(settings().book)
        changed = sorted(str(p) for p in before.keys() | after.keys() if before.get(p) != after.get(p))
        _CACHE["smoke"] = SmokeBook(out, results, build, t1 - t0, time.time() - t1, changed)
        print(f"smoke book: runner {t1 - t0:.0f} s, build {time.time() - t1:.0f} s")
    return _CACHE["smoke"]


def _stamps(root: Path) -> dict[Path, int]:
    return {p: p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()}


def build_log(b: SmokeBook) -> str:
    return (b.build.stdout + b.build.stderr)[-6000:]
