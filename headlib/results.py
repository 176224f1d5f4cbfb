"""Where the small result tables of the study go (CSV/JSON beside the executed notebooks).

The cpu profile's tables are committed under `results/<profile>/<pair>/seed<seed>/`; any other
profile writes under `artifacts/results/...` so that test runs never touch committed results.
"""
from __future__ import annotations

from pathlib import Path

from .files import artifacts_dir

REPO = Path(__file__).resolve().parent.parent


def results_dir(profile: str, pair: str, seed: int) -> Path:
    root = REPO / "results" if profile == "cpu" else artifacts_dir() / "results"
    path = root / profile / pair / f"seed{seed}"
    path.mkdir(parents=True, exist_ok=True)
    return path
