"""A notebook's source: its parameters cell, how much logic it holds, and the digest of what it
computes (a page's manifest records it; a page executed from another source is stale)."""
from __future__ import annotations

import ast
import hashlib
import json
import re
from pathlib import Path

from headlib.book.glue_refs import read_notebook
from headlib.book.plan import PARAMETERS, BookError


def parameters_cell(path: Path) -> dict:
    """The code cell tagged `parameters` (papermill's convention); an error if there is none."""
    for cell in read_notebook(path).cells:
        if cell.cell_type == "code" and "parameters" in cell.get("metadata", {}).get("tags", []):
            return cell
    raise BookError(f"{path}: no code cell tagged 'parameters' (papermill needs one; "
                    f"it must assign {', '.join(PARAMETERS)})")


def notebook_parameters(path: Path) -> list[str]:
    """Names assigned in the parameters cell."""
    return re.findall(r"^([A-Za-z_]\w*)\s*(?::[^=]+)?=", parameters_cell(path).source, flags=re.M)


def check_parameters(path: Path) -> None:
    """The parameters cell assigns `PARAMETERS` and nothing else: a page is run for a profile, a pair
    and a seed, and its sizes come from the profile's grids (`headlib.profiles.Grids`)."""
    names = notebook_parameters(path)
    if missing := [p for p in PARAMETERS if p not in names]:
        raise BookError(f"{path}: the parameters cell does not assign {', '.join(missing)}")
    if extra := [n for n in names if n not in PARAMETERS]:
        raise BookError(f"{path}: the parameters cell assigns {', '.join(extra)}; a page's parameters are "
                        f"{', '.join(PARAMETERS)} only (sizes come from the profile's grids, headlib.profiles.Grids)")


def code_size(path: Path) -> tuple[int, list[str]]:
    """How much logic a notebook holds: its lines of code (not blank, not comments) and its loops
    (`for`, `while` and comprehensions, each as the first line of its statement). A page is prose,
    headlib calls, a plot and glue: its tables and files come from tested calls."""
    lines, loops = 0, []
    for cell in read_notebook(path).cells:
        if cell.cell_type != "code":
            continue
        lines += sum(1 for line in cell.source.splitlines() if line.strip() and not line.strip().startswith("#"))
        starts = sorted(node.lineno for node in ast.walk(ast.parse(cell.source))
                        if isinstance(node, (ast.For, ast.While, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)))
        loops += [cell.source.splitlines()[n - 1].strip() for n in starts]
    return lines, loops


def source_digest(path: Path) -> str:
    """Hash of what a notebook computes: cell types, sources and tags (not outputs or metadata)."""
    cells = [[c.cell_type, c.source, sorted(c.get("metadata", {}).get("tags", []))] for c in read_notebook(path).cells]
    return hashlib.sha256(json.dumps(cells).encode()).hexdigest()[:16]
