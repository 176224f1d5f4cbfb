"""The book's pages, one module per notebook (`sec3`, `sec4`, `sec5`, `pruning` for both Sec. 6
pages, `beyond`, `claims`, `around`, `seeds`, `domains`): what each page computes, tabulates and
plots, as tested functions its notebook calls.

Here, what every page shares: its first line (profile, pair, seed, model and weights' fingerprint),
the other trained models it names (which `headlib.book.runner` records in the page's manifest and
`python -m headlib.book check` compares), and the glue of the values its prose cites.
"""
from __future__ import annotations

from headlib.train.records import model_id

# The glue key under which a page names the trained models it reads besides its (pair, seed)'s own
# Sec. 3 model (from-scratch runs, lottery tickets, domain or other pairs' models): the book runner
# records them in the page's manifest, and `headlib.book check` needs each to carry its fingerprint.
OTHER_MODELS = "other-models"


def page_header(profile: str, pair: str, seed: int, record: dict) -> str:
    """What a page of (pair, seed) reads, for its first line (Markdown): the profile, the pair, the
    seed and the trained model by its release (or run) and weights' fingerprint."""
    where = f"release `{record['release']['path']}` of " if record.get("release") else ""
    return (f"profile `{profile}`, pair `{pair}`, seed {seed}, {where}model `{record['run_dir']}` "
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


def glue_all(values: dict) -> None:
    """myst-nb's `glue` of every (key, value), not displayed: the numbers a page's prose cites."""
    from myst_nb import glue
    for key, value in values.items():
        glue(key, value, display=False)
