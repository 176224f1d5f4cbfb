"""The book's machinery, beside the research code (no research module imports it), one module a
concern:

    plan          the notebooks of the book, in dependency order, and the tasks of a run
    sources       a notebook's source: its parameters cell, its size, its digest
    keys          manifests and keys: what an executed page was computed from; status, estimate
    execution     executing one page with papermill, atomically
    runner        `run`: stale tasks, then each page's model, then execution, then its manifest
    toc           the generated table of contents and the strict build
    checks        `check`: is the book one consistent whole?
    verification  `verify`: re-execute a unit's pages from its release and compare their glued values
    cli           `python -m headlib.book run|status|check|verify|build`
    glue_refs     glue references and definitions; browse: the browser check

and `pages`: one module per page of the book with the tables, values and figures its notebook
shows, so that a notebook is prose, calls, plots and glue. The names below are the API.
"""
from headlib.book.checks import check, check_manifests, check_models, check_records
from headlib.book.execution import execute, prepare_out
from headlib.book.keys import (estimate, failed_path, manifest_path, page_runs, read_manifest, seconds_per_update,
                               status, upstream)
from headlib.book.plan import NOTEBOOKS, BookError, Notebook, Task, default_out, ordered, planned, select
from headlib.book.runner import TaskResult, run
from headlib.book.sources import check_parameters, code_size
from headlib.book.toc import build, write_toc
from headlib.book.verification import PageCheck, report, verify

__all__ = ["NOTEBOOKS", "BookError", "Notebook", "PageCheck", "Task", "TaskResult", "build", "check", "check_manifests",
           "check_models", "check_parameters", "check_records", "code_size", "default_out", "estimate", "execute",
           "failed_path", "manifest_path", "ordered", "page_runs", "planned", "prepare_out", "read_manifest", "report",
           "run", "seconds_per_update", "select", "status", "upstream", "verify", "write_toc"]
