"""Glue references in a book directory, checked against the keys its executed notebooks define.

A page refers to a number, table or figure of an executed notebook through myst-nb glue: the roles
{glue}`key`, {glue:text}`doc::key:fmt`, {glue:md}`key` and the directives {glue}, {glue:figure},
{glue:md} (with a :doc: option). `check_glue` parses them as myst-nb does and lists every reference
whose key no executed notebook of the book defines, so a strict build never meets a missing key.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

GLUE_MIME_PREFIX = "application/papermill.record/"   # myst_nb.glue(..., display=False)


def read_notebook(path: Path):
    import nbformat
    return nbformat.read(str(path), as_version=4)


_ROLE = re.compile(r"\{glue(?::(any|text|md))?\}`([^`]+)`")
_DIRECTIVE = re.compile(r"^[ \t]*(?:`{3,}|:{3,})\{glue(?::(any|figure|math|md))?\}[ \t]+(\S+)[ \t]*$", re.M)
_DOC_OPTION = re.compile(r"^[ \t]*:doc:[ \t]*(\S+)")


@dataclass(frozen=True)
class GlueRef:
    page: str          # docname of the referencing page (relative to the book, no suffix)
    doc: str           # docname the key must be defined in
    key: str
    line: int
    fmt: str = ""      # the format spec of a {glue:text} role ("" where there is none)


def _docname(out: Path, path: Path) -> str:
    return path.relative_to(out).with_suffix("").as_posix()


def _resolve(page: str, doc: str) -> str:
    """A glue `doc` reference as Sphinx resolves it: relative to the page, or to the root with '/'."""
    doc = doc.strip()
    base = PurePosixPath() if doc.startswith("/") else PurePosixPath(page).parent
    parts = []
    for part in (base / doc.lstrip("/")).parts:
        if part == "..":
            parts = parts[:-1]
        elif part != ".":
            parts.append(part)
    return str(PurePosixPath(*parts).with_suffix("")) if parts else ""


def references_in_text(text: str, page: str, first_line: int = 1) -> list[GlueRef]:
    """Glue roles and directives in MyST text, parsed as myst-nb parses them."""
    refs = []
    for m in _ROLE.finditer(text):
        kind, body, fmt = m.group(1) or "any", m.group(2), ""
        if kind in ("text", "md") and ":" in body.replace("::", ""):
            body, fmt = body.rsplit(":", 1)          # the format spec
        doc, _, key = body.rpartition("::") if "::" in body and kind != "md" else ("", "", body)
        refs.append(GlueRef(page, _resolve(page, doc) if doc else page, key, first_line + text.count("\n", 0, m.start()),
                            fmt if kind == "text" else ""))
    lines = text.splitlines()
    for m in _DIRECTIVE.finditer(text):
        line = text.count("\n", 0, m.start())
        doc = ""
        for option in lines[line + 1:]:
            if not option.strip().startswith(":"):
                break
            if d := _DOC_OPTION.match(option):
                doc = d.group(1)
        if m.group(1) in ("figure", "math", "md"):
            doc = ""   # these directives only read the page's own notebook
        refs.append(GlueRef(page, _resolve(page, doc) if doc else page, m.group(2), first_line + line))
    return refs


def book_pages(out: Path) -> list[Path]:
    """The pages of a book directory: Markdown pages and executed notebooks (not failed or temporary)."""
    pages = [p for p in out.rglob("*.md") if "_build" not in p.relative_to(out).parts]
    pages += [p for p in (out / "executed").rglob("*.ipynb")
              if not p.name.endswith((".failed.ipynb", ".tmp.ipynb")) and not p.name.startswith(".")]
    return sorted(pages)


def glue_references(out: Path) -> list[GlueRef]:
    refs = []
    for path in book_pages(out):
        page = _docname(out, path)
        if path.suffix == ".md":
            refs += references_in_text(path.read_text(encoding="utf-8"), page)
        else:
            for i, cell in enumerate(read_notebook(path).cells):
                if cell.cell_type == "markdown":
                    refs += [GlueRef(r.page, r.doc, r.key, i, r.fmt) for r in references_in_text(cell.source, page)]
    return refs


def glue_definitions(out: Path) -> dict[str, set[str]]:
    """Glue keys defined by each executed notebook: outputs that myst_nb.glue marked (with
    `metadata.scrapbook.name`; `display=False` prefixes their mime types with GLUE_MIME_PREFIX)."""
    defined: dict[str, set[str]] = {}
    for path in book_pages(out):
        if path.suffix != ".ipynb":
            continue
        keys = defined.setdefault(_docname(out, path), set())
        for cell in read_notebook(path).cells:
            for output in cell.get("outputs", []):
                name = output.get("metadata", {}).get("scrapbook", {}).get("name")
                if name:
                    keys.add(name)
    return defined


def check_glue(out: Path) -> list[str]:
    """One line per glue reference that no executed notebook defines."""
    defined = glue_definitions(out)
    problems = []
    for ref in glue_references(out):
        if ref.doc not in defined:
            problems.append(f"{ref.page} (line/cell {ref.line}): glue key {ref.key!r} refers to {ref.doc!r}, "
                            "which is not an executed notebook of this book")
        elif ref.key not in defined[ref.doc]:
            problems.append(f"{ref.page} (line/cell {ref.line}): glue key {ref.key!r} is not defined in {ref.doc}")
    return problems


def glued_text(path: Path, key: str) -> str | None:
    """The text a notebook glued under `key` (a str glued with display=False), or None."""
    import ast
    for cell in read_notebook(path).cells:
        for output in cell.get("outputs", []):
            if output.get("metadata", {}).get("scrapbook", {}).get("name") == key:
                text = output.get("data", {}).get(GLUE_MIME_PREFIX + "text/plain")
                return ast.literal_eval(text) if text is not None else None
    return None
