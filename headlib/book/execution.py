"""Executing one page: papermill into a temporary file that replaces the previous output only on
success; a failure names the cell and the error, keeps the previous good output, and leaves the
failed execution beside it as `<name>.failed.ipynb` (git-ignored). Pages state their profile, pair
and seed in prose, so the parameters cell (tagged `remove-cell` in the source) and papermill's
injected-parameters cell (tagged here) are not rendered."""
from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path

from headlib.book.glue_refs import read_notebook
from headlib.book.keys import failed_path
from headlib.book.plan import BookError, Task, default_out
from headlib.settings import rel, settings

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def execute(task: Task, source: Path, output: Path, progress: bool = True, log_output: bool = False) -> None:
    """Execute `source` into `output` atomically; on failure raise BookError naming the cell."""
    import nbformat
    import papermill as pm
    from papermill.exceptions import PapermillExecutionError

    output.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{output.stem}.", suffix=".tmp.ipynb", dir=output.parent)
    os.close(fd)
    tmp = Path(tmp)
    try:
        try:
            pm.execute_notebook(str(source), str(tmp), parameters=task.parameters, kernel_name="python3",
                                cwd=str(settings().root), progress_bar=progress, log_output=log_output)
        except PapermillExecutionError as e:
            failed = failed_path(output)
            shutil.copyfile(tmp, failed)
            trace = _ANSI.sub("", "\n".join(e.traceback))
            kept = f"the previous output {rel(output)} is kept" if output.is_file() else "there was no previous output"
            raise BookError(
                f"{task.label} failed in cell {e.cell_index} (execution count {e.exec_count}) of "
                f"{rel(source)}:\n\n{e.source}\n\n{trace}\n\n{e.ename}: {e.evalue}\n"
                f"({kept}; the failed execution is in {rel(failed)})") from None
        nb = read_notebook(tmp)
        meta = nb.metadata.get("papermill", {})   # no temporary or machine-specific paths in the book
        meta["input_path"], meta["output_path"] = rel(source), rel(output)
        for cell in nb.cells:   # the page shows its parameters in prose; hide papermill's cell too
            tags = cell.get("metadata", {}).get("tags", [])
            if "injected-parameters" in tags and "remove-cell" not in tags:
                tags.append("remove-cell")
        nbformat.write(nb, str(tmp))
        tmp.chmod(0o644)
        os.replace(tmp, output)
    finally:
        tmp.unlink(missing_ok=True)
    failed_path(output).unlink(missing_ok=True)


def prepare_out(out: Path, profile: str, force: bool = False) -> None:
    """Copy the hand-written pages and the config into a book directory other than book/; refuse to
    mix profiles in one book directory."""
    if out.resolve() == settings().book.resolve() and profile != "cpu" and not force:
        raise BookError(f"book/ holds the committed outputs of the cpu profile; the {profile} profile's book "
                        f"goes to {rel(default_out(profile))} (or another --out)")
    out.mkdir(parents=True, exist_ok=True)
    others = {json.loads(p.read_text()).get("profile") for p in (out / "executed").glob("*/*/*.manifest.json")}
    others.discard(profile)
    if others and not force:
        raise BookError(f"{rel(out)} holds outputs of profile {', '.join(sorted(others))}, not {profile}; "
                        f"use --out (default for {profile}: {rel(default_out(profile))}) or --force")
    if out.resolve() == settings().book.resolve():
        return
    for item in settings().book.iterdir():
        if item.name in ("_build", "executed", "_toc.yml") or item.name.startswith("."):
            continue
        if item.is_dir():
            shutil.copytree(item, out / item.name, dirs_exist_ok=True)
        else:
            shutil.copy2(item, out / item.name)
    shutil.copy2(settings().root / "_config.yml", out / "_config.yml")
