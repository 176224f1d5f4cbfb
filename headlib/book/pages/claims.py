"""The Claims page: every claim's value and verdict for this page's (pair, seed) (written to
claims.csv), which model each verdict comes from, and the verdicts of every pair with results."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from headlib.book.keys import page_runs
from headlib.book.plan import default_out
from headlib.claims import VERDICT_KEYS, claims_table, other_models_note, verdicts
from headlib.config import get_config
from headlib.train.trainer import run_dir


def own_run(profile: str, pair: str, seed: int) -> str:
    """The run of (profile, pair, seed): the Sec. 3 model every claim of that unit should read."""
    return run_dir(get_config(profile, [f"train.seed={seed}"], pair=pair)).name


def models_note(table: pd.DataFrame, run: str) -> str:
    """Which model the verdicts come from (Markdown): the claims read from another run than `run`,
    else that every claim reads it."""
    return other_models_note(table, run) or f"Every claim comes from this page's model (`{run}`, Sec. 3)."


def page_table(profile: str, pair: str, seed: int, out: Path) -> pd.DataFrame:
    """`claims_table` of the unit's results (`out`), with the run each claim's page read (from the
    executed pages' manifests), written to `out/claims.csv`."""
    table = claims_table(out, runs=page_runs(default_out(profile), profile, pair, seed))
    table.to_csv(out / "claims.csv", index=False)
    return table


def verdict_values(table: pd.DataFrame) -> dict:
    """Each claim's value and verdict (`claims-c1-ours`, `claims-c1-verdict`, ...: the introduction
    cites them) and how many claims got each verdict (`claims-n-holds`, ...)."""
    values = {key: value for row in table.itertuples() for key, value in (
        (f"claims-{row.claim.lower()}-ours", row.ours), (f"claims-{row.claim.lower()}-verdict", row.verdict))}
    counts = {f"claims-n-{name}": int((table["verdict"] == verdict).sum()) for name, verdict in VERDICT_KEYS.items()}
    return values | counts


def pairs_with_results(out: Path, seed: int) -> list[str]:
    """The pairs (and domains) beside `out` whose unit of this seed has a Sec. 4 table."""
    return sorted(p.parent.parent.name for p in out.parent.parent.glob(f"*/seed{seed}/head_importance.csv"))


def across_pairs(profile: str, seed: int, out: Path) -> tuple[pd.DataFrame, list[str], str]:
    """The verdicts of every pair with results (rows: claims), those pairs, and a note (Markdown) on
    the pairs whose claims read another model than their own."""
    pairs = pairs_with_results(out, seed)
    units = {p: out.parent.parent / p / f"seed{seed}" for p in pairs}
    notes = [f"{p}: {note}" for p in pairs if (note := other_models_note(
        claims_table(units[p], runs=page_runs(default_out(profile), profile, p, seed)), own_run(profile, p, seed)))]
    return verdicts(units), pairs, " ".join(notes)
