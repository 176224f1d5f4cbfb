"""The Verdicts page: the study's answer in one matrix. Rows: the paper's claims (C1-C9, each unit's
Claims page, claims.csv) and the follow-up claims around it (A1-A8, the Around page,
around_studies.csv); columns: every unit (pair, seed) whose Claims page is in the book; each cell
that unit's verdict, read from the table its page wrote (nothing is judged again here). The last
columns count the units where a claim holds among those where it could be judged, and name the
pairs whose seeds disagree.

    unit_dirs(profile)                 the units with a claims table, by column name
    verdict_matrix(units)              the matrix (rows: claims)
    matrix_values(matrix)              the counts its prose cites
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from headlib.claims import FAILS, HOLDS, MISSING, PARTLY
from headlib.settings import results_root

JUDGED = (HOLDS, PARTLY, FAILS)                        # a verdict; "not measured" and "not assessable" are none
TABLES = ("claims.csv", "around_studies.csv")          # C1-C9 (09_claims), A1-A8 (10_around)
COUNT, SEEDS_DIFFER = "holds in k of n", "seeds differ"


def unit_dirs(profile: str) -> dict[str, Path]:
    """{"en-de, seed 1": results/<profile>/en-de/seed1, ...}: every unit with a claims table, by pair
    (the order of `corpora.PAIRS`) and seed."""
    from headlib.data.corpora import PAIRS
    rank = {p: i for i, p in enumerate(PAIRS)}
    found = [(d.parent.name, int(d.name.removeprefix("seed")), d)
             for d in (results_root(profile) / profile).glob("*/seed*") if (d / TABLES[0]).is_file()]
    return {f"{pair}, seed {seed}": d for pair, seed, d in sorted(found, key=lambda u: (rank.get(u[0], len(rank)),
                                                                                       u[0], u[1]))}


def verdict_matrix(units: dict[str, Path]) -> pd.DataFrame:
    """One row per claim ("C1 <what the paper says>", ...), one column per unit with its verdict
    ("not measured" where the unit's table lacks the claim), then `COUNT` ("k of n": units where it
    holds, of those where it was judged; "-" where none was) and `SEEDS_DIFFER` (the pairs whose
    judged seeds disagree)."""
    verdicts: dict[str, pd.Series] = {}
    said: dict[str, str] = {}
    for name, folder in units.items():
        rows = pd.concat([pd.read_csv(folder / t) for t in TABLES if (folder / t).is_file()], ignore_index=True)
        verdicts[name] = rows.set_index("claim")["verdict"]
        said |= dict(zip(rows["claim"], rows["the paper says"]))
    claims = sorted(said, key=lambda c: (c[0] != "C", int(c[1:])))
    matrix = pd.DataFrame({name: v.reindex(claims).fillna(MISSING) for name, v in verdicts.items()})
    judged = matrix.isin(JUDGED)
    holds = (matrix == HOLDS).sum(axis=1)
    matrix[COUNT] = [f"{k} of {n}" if n else "-" for k, n in zip(holds, judged.sum(axis=1))]
    pairs = {name: name.split(",")[0] for name in units}
    matrix[SEEDS_DIFFER] = [", ".join(sorted({pairs[u] for u in units if judged.at[c, u]
                                              and matrix.loc[c, [v for v in units if pairs[v] == pairs[u]
                                                                 and judged.at[c, v]]].nunique() > 1}))
                            for c in claims]
    matrix.index = pd.Index([f"{c} {said[c]}" for c in claims], name="claim")
    return matrix


def matrix_values(matrix: pd.DataFrame, units: dict[str, Path]) -> dict:
    """What the page's prose cites: the number of units and of claims, how many claims hold in every
    unit that judged them, in none, and how many differ between seeds of one pair."""
    cells = matrix[list(units)]
    judged = cells.isin(JUDGED)
    every = ((cells == HOLDS) | ~judged).all(axis=1) & judged.any(axis=1)
    never = ((cells != HOLDS) | ~judged).all(axis=1) & judged.any(axis=1)
    return {"verdicts-n-units": len(units), "verdicts-n-claims": len(matrix),
            "verdicts-units": "; ".join(units), "verdicts-n-every": int(every.sum()),
            "verdicts-n-never": int(never.sum()), "verdicts-n-unjudged": int((~judged.any(axis=1)).sum()),
            "verdicts-n-seeds-differ": int((matrix[SEEDS_DIFFER] != "").sum())}
