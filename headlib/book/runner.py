"""The book runner: execute the study's notebooks with papermill into the Jupyter Book.

A book directory (`book/` for the cpu profile, whose outputs are committed; `artifacts/book-<profile>/`
for any other profile, so that smoke runs never overwrite them) looks like this:

    intro.md, reproduce.md, ...        hand-written pages; their sources live in book/ and are
                                       copied into any other book directory
    _config.yml                        (only outside book/; book/ uses the repository's own)
    _toc.yml                           generated: the hand-written pages plus every executed notebook
    executed/<pair>/seed<seed>/<name>.ipynb          notebooks/<name>.ipynb executed for one pair
                                                     and seed: a page of the book
    executed/<pair>/seed<seed>/<name>.manifest.json  what that output was executed from (`keys`)

`run` executes the stale pages in dependency order: for each, the model it reads (its release,
else trained), then papermill (`execution`), then its manifest.
"""
from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Sequence

from headlib.book.execution import execute, prepare_out
from headlib.book.glue_refs import glued_text
from headlib.book.keys import _digest, estimate, manifest_path, page_model, read_manifest, status, task_key
from headlib.book.pages import OTHER_MODELS
from headlib.book.plan import NOTEBOOKS, BookError, Notebook, Task, clock, default_out
from headlib.book.sources import check_parameters
from headlib.book.toc import write_toc
from headlib.files import artifacts_dir, write_json
from headlib.settings import rel, settings


@dataclass
class TaskResult:
    task: Task
    status: str          # "executed" or "skipped"
    seconds: float
    output: Path


def run(profile: str = "cpu", pairs: Iterable[str] = ("en-de",), seeds: Iterable[int] = (1,),
        out: str | Path | None = None, force: bool = False, progress: bool = True, log_output: bool = False,
        notebooks: Sequence[Notebook] = NOTEBOOKS, src_dir: Path | None = None,
        log: Callable[[str], None] | None = None, toc: Sequence[Notebook] | None = None,
        train: bool = True) -> list[TaskResult]:
    """Execute every (notebook, pair, seed) whose key changed, in dependency order; write the toc
    over `toc` (default: `notebooks`; a run of a subset passes the whole book). `train`: whether a
    model without a release may be trained (else such a page is an error)."""
    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    src_dir = src_dir or settings().notebooks
    out = Path(out) if out else default_out(profile)
    pairs, seeds = list(pairs), [int(s) for s in seeds]
    plan = stale_tasks(profile, pairs, seeds, out, notebooks, src_dir, force, log)
    t0, results = time.time(), []
    try:
        for i, (task, why) in enumerate(plan, 1):
            source, output = src_dir / f"{task.nb.name}.ipynb", task.output(out)
            head = lambda: f"[book {clock(time.time() - t0)}] {i}/{len(plan)} {task.label}"
            if not why:
                log(f"{head()}: {'kept' if task.nb.pair and task.nb.pair not in pairs else 'unchanged'}, skipped")
                results.append(TaskResult(task, "skipped", 0.0, output))
                continue
            task_key(task, source, out)   # its upstream outputs exist, else an error naming them
            ensure_model(task, train, progress, lambda msg: log(f"{head()}: {msg}"))
            log(f"{head()}: executing -> {rel(output)} ({len(plan) - i} left after this)")
            start = time.time()
            execute(task, source, output, progress=progress, log_output=log_output)
            write_manifest(task, source, out, time.time() - start)
            log(f"{head()}: done in {clock(time.time() - start)}")
            results.append(TaskResult(task, "executed", time.time() - start, output))
    finally:
        write_toc(out, profile, notebooks if toc is None else toc)
    ran = sum(r.status == "executed" for r in results)
    log(f"[book {clock(time.time() - t0)}] {ran} executed, {len(results) - ran} skipped; toc: {rel(out / '_toc.yml')}")
    return results


def stale_tasks(profile: str, pairs: list[str], seeds: list[int], out: Path, notebooks: Sequence[Notebook],
                src_dir: Path, force: bool, log: Callable[[str], None]) -> list[tuple[Task, list[str]]]:
    """Every task of the run with what makes it execute (empty: skipped), after checking the profile,
    the pairs and the notebooks' parameters and preparing the book directory; logs the estimate."""
    from headlib.config import get_config
    for pair in pairs:
        get_config(profile, pair=pair)   # validates profile and pair
    for nb in notebooks:
        check_parameters(src_dir / f"{nb.name}.ipynb")
    # The kernels must see the same artifacts as this process, whatever their working directory.
    os.environ.setdefault("HEADLIB_ARTIFACTS", str(artifacts_dir()))
    prepare_out(out, profile, force)
    plan = []
    for task, why in status(profile, pairs, seeds, out, notebooks, src_dir):
        kept = task.nb.pair and task.nb.pair not in pairs and read_manifest(task.output(out)) is not None
        plan.append((task, [] if kept else why or (["--force"] if force else [])))
    log(f"[book] profile {profile}: {len(plan)} notebook run(s) into {rel(out)}")
    seconds, parts = estimate(plan, out)
    if parts:
        log(f"[book] estimate: about {clock(seconds)} for {sum(bool(w) for _, w in plan)} page(s), as measured "
            "before (machines differ):\n  " + "\n  ".join(parts))
    return plan


def ensure_model(task: Task, train: bool, progress: bool, log: Callable[[str], None]) -> None:
    """The model a page reads, ready: its release, else its run (trained now if `train`)."""
    from headlib.train import release, run_dir
    from headlib.train import train as train_run
    cfg = task.config()
    if not task.nb.trains or release.release_of(cfg) is not None or (run_dir(cfg) / "results.json").is_file():
        return
    if not train:
        raise BookError(f"{task.label} reads a model with no release "
                        f"({rel(release.release_dir(task.profile, task.pair, task.seed))}) and no run on this machine, "
                        f"and this run may not train: train and release it first (python -m headlib train --profile "
                        f"{task.profile} --pair {task.pair} --seed {task.seed}, then python -m headlib release ...)")
    log(f"training {task.pair} ({task.profile} profile, seed {task.seed}) -> {rel(run_dir(cfg))}")
    train_run(cfg, progress=progress)


def write_manifest(task: Task, source: Path, out: Path, seconds: float) -> None:
    """The manifest of a page just executed: its key and basis, the models it read, its time. A table
    the notebook read may be a cache it filled itself (the cross-lingual head profiles): the output
    goes with the tables as they are now, so the next run finds it unchanged."""
    output = task.output(out)
    _, basis = task_key(task, source, out)
    others = glued_text(output, OTHER_MODELS)
    write_json(manifest_path(output), basis | {"key": _digest(basis), "profile": task.profile,
                                               "model": page_model(task),
                                               "other_models": json.loads(others) if others else [],
                                               "seconds": round(seconds, 1),
                                               "executed_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}).chmod(0o644)
