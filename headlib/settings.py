"""Where things are: the one settings object for every path the package reads or writes.

    root       the repository: $HEADLIB_ROOT, else the nearest directory at or above the working
               directory whose pyproject.toml names headlib
    data       the corpora (read only): $HEADLIB_DATA, else <root>/../shared/data
    artifacts  every cache (BPE models, checkpoints, parses): $HEADLIB_ARTIFACTS, else <root>/artifacts
    results    the committed result tables: $HEADLIB_RESULTS, else <root>/results (`python -m headlib.book
               verify` re-executes pages against a scratch copy)
    models     the released models (weights, tokenizer, card per profile, pair, seed): <root>/models
    notebooks  the study's notebook sources: <root>/notebooks
    book       the cpu profile's book (hand-written pages, executed notebooks): <root>/book

`results_dir(profile, pair, seed)` is where one (profile, pair, seed)'s result tables go.

Read afresh on each call, so that an environment variable set later (the tests set
HEADLIB_ARTIFACTS) takes effect.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


class SettingsError(RuntimeError):
    """No repository root could be found."""


@dataclass(frozen=True)
class Settings:
    root: Path
    data: Path
    artifacts: Path
    results: Path
    models: Path
    notebooks: Path
    book: Path


def find_root(start: Path | None = None) -> Path:
    """$HEADLIB_ROOT, else the nearest directory at or above `start` (the working directory) with a
    pyproject.toml that names headlib."""
    if os.environ.get("HEADLIB_ROOT"):
        return Path(os.environ["HEADLIB_ROOT"]).resolve()
    start = (start or Path.cwd()).resolve()
    for d in (start, *start.parents):
        project = d / "pyproject.toml"
        if project.is_file() and 'name = "headlib"' in project.read_text(encoding="utf-8"):
            return d
    raise SettingsError(f"no headlib repository at or above {start}: run from the repository, "
                        "or set HEADLIB_ROOT to it")


def settings() -> Settings:
    root = find_root()
    env = os.environ.get
    return Settings(
        root=root,
        data=Path(env("HEADLIB_DATA") or root.parent / "shared" / "data").resolve(),
        artifacts=Path(env("HEADLIB_ARTIFACTS") or root / "artifacts").resolve(),
        results=Path(env("HEADLIB_RESULTS") or root / "results").resolve(),
        models=root / "models",
        notebooks=root / "notebooks",
        book=root / "book",
    )


def rel(path: Path) -> str:
    """`path` relative to the repository (as POSIX), or as it is when it lies outside it: how files
    are named in what the project writes (manifests, cards, messages)."""
    try:
        return Path(path).resolve().relative_to(settings().root).as_posix()
    except ValueError:
        return str(path)


READ_ONLY = "HEADLIB_READ_ONLY"   # set (by `headlib.book verify`): pages read records and never compute one


def results_dir(profile: str, pair: str, seed: int) -> Path:
    """Where the result tables of (profile, pair, seed) go: the cpu profile's are committed under
    `results/`, any other profile's under `artifacts/results/` (so test runs never touch them);
    every profile's under $HEADLIB_RESULTS where it is set."""
    path = results_root(profile) / profile / pair / f"seed{seed}"
    path.mkdir(parents=True, exist_ok=True)
    return path


def results_root(profile: str) -> Path:
    """The folder of `profile`'s result tables (`results_dir` without the profile, pair and seed)."""
    s = settings()
    return s.results if profile == "cpu" or os.environ.get("HEADLIB_RESULTS") else s.artifacts / "results"
