"""Where the small result tables of the study go (CSV/JSON beside the executed notebooks).

The cpu profile's tables are committed under `results/<profile>/<pair>/seed<seed>/`; any other
profile writes under `artifacts/results/...` so that test runs never touch committed results.
"""
from __future__ import annotations

from pathlib import Path

from .files import artifacts_dir
from .settings import settings


def results_dir(profile: str, pair: str, seed: int) -> Path:
    root = settings().results if profile == "cpu" else artifacts_dir() / "results"
    path = root / profile / pair / f"seed{seed}"
    path.mkdir(parents=True, exist_ok=True)
    return path


# The glue key under which a page names the trained models it reads besides its (pair, seed)'s own
# Sec. 3 model (from-scratch runs, lottery tickets, domain or other pairs' models): the book runner
# records them in the page's manifest, and `headlib.book check` needs each to carry its fingerprint.
OTHER_MODELS = "other-models"


def model_id(record: dict) -> dict:
    """Which trained model a training record (results.json) is: its run and its weights' fingerprint."""
    return {"run_dir": record.get("run_dir"), "fingerprint": record.get("fingerprint")}


def page_header(profile: str, pair: str, seed: int, record: dict) -> str:
    """What a page of (pair, seed) reads, for its first line (Markdown): the profile, the pair, the
    seed and the trained model by run and weights' fingerprint."""
    return (f"profile `{profile}`, pair `{pair}`, seed {seed}, model `{record['run_dir']}` "
            f"(weights {record.get('fingerprint') or 'not fingerprinted'})")


def other_models(records, role: str) -> list[dict]:
    """The models of training records (results.json) that a page reads besides its own, with the
    role they play there, keyed as a page's manifest names models: [{"run", "fingerprint", "role"}]."""
    return [{"run": m["run_dir"], "fingerprint": m["fingerprint"], "role": role} for m in map(model_id, records)]


def other_models_note(models: list[dict], own: bool = True) -> str:
    """One sentence for the page that names them (Markdown); `own`: the page also reads the Sec. 3
    model of its (pair, seed)."""
    if not models:
        return "This page reads no trained model besides its own." if own else "This page reads no trained model."
    listed = "; ".join(f"`{m['run']}` (weights {m['fingerprint'] or 'not fingerprinted'}, {m['role']})" for m in models)
    return f"{'Besides its own model, this' if own else 'This'} page reads {len(models)} trained model(s): {listed}."
