"""`python -m headlib.book verify`: can a reader get the book's pages back?

Every page of a unit (profile, pair, seed) in the book is executed again from the unit's release
and the committed records, into a scratch folder (`artifacts/verify/<profile>-<pair>-seed<seed>/`:
a book directory and a copy of the result tables, so the committed ones are never written), without
training anything. Then every glued value of each page is compared with the committed page's:

    numbers    equal when they print the same at the precision the book prints them (the format
               spec of the `{glue:text}` roles that cite them; a float no role cites is printed
               nowhere and compares at `UNCITED_FORMAT`, a number cited without a spec as its
               repr); the largest absolute difference is reported
    text       Markdown, strings and tables (HTML, with pandas' random element ids left out): equal
               when identical
    figures    equal when the PNG bytes are identical
    timings    a page's own measurement of how long it took (keys ending in `-seconds`, and the
               tables of measured minutes in `TIMING_KEYS`): counted apart and not compared, since
               no two executions take the same time
"""
from __future__ import annotations

import ast
import os
import re
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable
from unittest import mock

from headlib.book.glue_refs import GLUE_MIME_PREFIX, glue_references, read_notebook
from headlib.book.plan import NOTEBOOKS, clock, default_out
from headlib.settings import READ_ONLY, rel, results_root, settings

_STYLER_ID = re.compile(r"T_[0-9a-f]{5}(_[0-9a-f]+)?")   # pandas Styler's per-render element ids
TIMING_SUFFIX = "-seconds"                                # a glued wall-clock measurement of the page's own
TIMING_KEYS = frozenset({"claims-done"})                  # glued tables of measured times (the Claims page's steps)
UNCITED_FORMAT = ".6g"   # a glued float no page prints: more digits than any printed value, far fewer than the
                         # 16th-17th, where another CPU's rounding moves a float


@dataclass
class PageCheck:
    page: str                      # executed/<pair>/seed<seed>/<notebook>
    values: int = 0                # glued values of the committed page (timings aside)
    equal: int = 0                 # of which the re-executed page gives the same at printed precision
    largest: float = 0.0           # the largest absolute difference of a glued number
    differing: list[str] = field(default_factory=list)   # keys that differ (or are missing)
    seconds: float = 0.0           # the re-execution's time
    timings: int = 0               # glued timings (`TIMING_SUFFIX`), not compared

    @property
    def ok(self) -> bool:
        return self.equal == self.values


def glued_values(path: Path) -> dict[str, tuple[str, str]]:
    """{key: (mime type, content)} of every value a notebook glued, by its main representation:
    a figure's PNG, else a table's or Markdown's HTML/Markdown, else its text."""
    values = {}
    for cell in read_notebook(path).cells:
        for output in cell.get("outputs", []):
            name = output.get("metadata", {}).get("scrapbook", {}).get("name")
            if not name:
                continue
            data = {k.removeprefix(GLUE_MIME_PREFIX): v for k, v in output.get("data", {}).items()}
            mime = next((m for m in ("image/png", "text/html", "text/markdown", "text/plain") if m in data), None)
            if mime:
                content = data[mime] if isinstance(data[mime], str) else "".join(data[mime])
                values[name] = (mime, _STYLER_ID.sub("T_", content) if mime == "text/html" else content)
    return values


def _number(text: str) -> int | float | None:
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return None
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _printed(value: int | float, fmts: set[str], text: str) -> tuple[str, ...]:
    """How the book prints a number: with each format spec that cites it, else as its repr."""
    def printed(fmt: str) -> str:
        try:
            return format(value, fmt.removesuffix("s"))
        except ValueError:
            return text
    return tuple(printed(f) for f in sorted(fmts)) if fmts else (text,)


def compare_page(committed: Path, again: Path, fmts: dict[str, set[str]], page: str, seconds: float = 0.0,
                 cited_keys: frozenset[str] = frozenset()) -> PageCheck:
    """Every glued value of `committed` against the same key in `again` (`fmts`: the format specs
    the book cites each key with; `cited_keys`: every key some role cites, with a spec or without)."""
    old, new = glued_values(committed), glued_values(again)
    timings = [key for key in old if key.endswith(TIMING_SUFFIX) or key in TIMING_KEYS]
    old = {key: value for key, value in old.items() if key not in timings}
    check = PageCheck(page, values=len(old), seconds=seconds, timings=len(timings))
    for key, (mime, content) in old.items():
        if key not in new or new[key][0] != mime:
            check.differing.append(key)
            continue
        a, b = (_number(content), _number(new[key][1])) if mime == "text/plain" else (None, None)
        if a is not None and b is not None:
            check.largest = max(check.largest, abs(a - b))
            cited = fmts.get(key) or ({UNCITED_FORMAT} if isinstance(a, float) and key not in cited_keys else set())
            same = _printed(a, cited, content) == _printed(b, cited, new[key][1])
        else:
            same = content == new[key][1]
        if same:
            check.equal += 1
        else:
            check.differing.append(key)
    return check


def format_specs(out: Path) -> tuple[dict[str, dict[str, set[str]]], dict[str, frozenset[str]]]:
    """{page: {key: the format specs of the {glue:text} roles that cite it}} over the whole book,
    and {page: the keys some role cites, with or without a spec}."""
    specs: dict[str, dict[str, set[str]]] = {}
    cited: dict[str, set[str]] = {}
    for ref in glue_references(out):
        cited.setdefault(ref.doc, set()).add(ref.key)
        if ref.fmt:
            specs.setdefault(ref.doc, {}).setdefault(ref.key, set()).add(ref.fmt)
    return specs, {doc: frozenset(keys) for doc, keys in cited.items()}


def committed_units(out: Path) -> list[tuple[str, int]]:
    """The (pair, seed) units with executed pages in the book directory `out`."""
    return sorted((d.parent.name, int(d.name.removeprefix("seed"))) for d in (out / "executed").glob("*/seed*")
                  if any(d.glob("*.ipynb")))


def verify(profile: str = "cpu", pair: str = "en-de", seed: int = 1, out: Path | None = None,
           scratch: Path | None = None, log: Callable[[str], None] = print) -> list[PageCheck]:
    """Re-execute the pages of (profile, pair, seed) in the book `out` from the unit's release and
    the committed records into `scratch`, with no training, and compare each page's glued values."""
    from headlib.book.runner import run
    out = Path(out) if out else default_out(profile)
    scratch = Path(scratch) if scratch else settings().artifacts / "verify" / f"{profile}-{pair}-seed{seed}"
    folder = out / "executed" / pair / f"seed{seed}"
    names = {p.stem for p in folder.glob("*.ipynb")}
    notebooks = tuple(nb for nb in NOTEBOOKS if nb.name in names)
    if not notebooks:
        raise FileNotFoundError(f"{rel(folder)}: no executed pages of {pair}, seed {seed} to verify")
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(settings().results, scratch / "results")          # the committed records every page may read
    if (own := results_root(profile) / profile).is_dir() and own.parent != settings().results:
        shutil.copytree(own, scratch / "results" / profile, dirs_exist_ok=True)   # another profile's tables
    t0 = time.time()
    with mock.patch.dict(os.environ, {"HEADLIB_RESULTS": str(scratch / "results"), READ_ONLY: "1"}):   # restored after
        results = run(profile, [pair], [seed], scratch / "book", force=True, progress=False, notebooks=notebooks,
                      toc=notebooks, log=log, train=False)
    log(f"[verify] {len(results)} page(s) re-executed in {clock(time.time() - t0)} into {rel(scratch)}")
    specs, cited = format_specs(out)
    checks = []
    for r in results:
        page = r.output.relative_to(scratch / "book").with_suffix("").as_posix()
        checks.append(compare_page(out / f"{page}.ipynb", r.output, specs.get(page, {}), page, r.seconds,
                                   cited.get(page, frozenset())))
    return checks


def verification_record(checks: list[PageCheck], units: list[tuple[str, int]], seconds: float) -> dict:
    """What one `verify` run measured, as JSON: the units and each page's check, the wall-clock
    `seconds` of the whole run (copying the records included) and the machine it ran on."""
    from headlib.train.machine import machine
    return {"units": [f"{pair}/seed{seed}" for pair, seed in units], "seconds": round(seconds, 1),
            "values": sum(c.values for c in checks), "equal": sum(c.equal for c in checks),
            "pages": [asdict(c) for c in checks], "machine": machine()}


def report(checks: list[PageCheck]) -> str:
    """The per-page table (Markdown) and its total time."""
    rows = ["| page | glued values | equal at printed precision | largest difference | timings (not compared) "
            "| seconds |", "|---|---|---|---|---|---|"]
    rows += [f"| {c.page} | {c.values} | {c.equal} | {c.largest:.3g} | {c.timings} | {c.seconds:.0f} |" for c in checks]
    rows.append(f"| total | {sum(c.values for c in checks)} | {sum(c.equal for c in checks)} | "
                f"{max((c.largest for c in checks), default=0):.3g} | {sum(c.timings for c in checks)} | "
                f"{sum(c.seconds for c in checks):.0f} |")
    differing = [f"{c.page}: {', '.join(c.differing)}" for c in checks if c.differing]
    return "\n".join(rows + (["", "differing: " + "; ".join(differing)] if differing else []))
