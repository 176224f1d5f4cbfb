"""The verdicts page (`headlib.book.pages.verdicts`): every unit's verdicts in one matrix, read
from the tables each unit's Claims and Around pages wrote, with the count of units where each holds."""
import pandas as pd

from headlib.book.pages.verdicts import COUNT, SEEDS_DIFFER, matrix_values, verdict_matrix
from headlib.claims import FAILS, HOLDS, MISSING, PARTLY, UNASSESSABLE


def _unit(folder, verdicts: dict[str, str], around: dict[str, str] | None = None):
    folder.mkdir(parents=True)
    rows = lambda v: pd.DataFrame({"claim": list(v), "the paper says": [f"claim {c}" for c in v], "verdict": list(v.values())})
    rows(verdicts).to_csv(folder / "claims.csv", index=False)
    if around:
        rows(around).to_csv(folder / "around_studies.csv", index=False)
    return folder


def test_the_matrix_counts_where_each_claim_holds_and_names_pairs_whose_seeds_differ(tmp_path):
    units = {"en-de, seed 1": _unit(tmp_path / "a", {"C1": HOLDS, "C2": PARTLY, "C10": FAILS}, {"A1": HOLDS}),
             "en-de, seed 2": _unit(tmp_path / "b", {"C1": HOLDS, "C2": FAILS, "C10": MISSING}),
             "en-fr, seed 1": _unit(tmp_path / "c", {"C1": UNASSESSABLE, "C2": PARTLY, "C10": FAILS})}
    m = verdict_matrix(units)
    assert list(m.index) == ["C1 claim C1", "C2 claim C2", "C10 claim C10", "A1 claim A1"]   # C by number, then A
    assert m.loc["A1 claim A1", "en-de, seed 2"] == MISSING                 # no Around page for that unit
    assert m[COUNT].tolist() == ["2 of 2", "0 of 3", "0 of 2", "1 of 1"]     # not assessable, not measured: not judged
    assert m[SEEDS_DIFFER].tolist() == ["", "en-de", "", ""]                 # partly against does not hold
    values = matrix_values(m, units)
    assert (values["verdicts-n-every"], values["verdicts-n-never"], values["verdicts-n-seeds-differ"]) == (2, 2, 1)
    assert values["verdicts-n-units"] == 3 and values["verdicts-n-unjudged"] == 0


def test_the_verdicts_page_comes_first_in_the_table_of_contents_though_executed_last():
    from headlib.book.plan import NOTEBOOKS, ordered
    order = [nb.name for nb in ordered(NOTEBOOKS)]
    assert order.index("01_verdicts") > max(order.index(n) for n in ("09_claims", "10_around", "11_seeds"))
    first = sorted(ordered(NOTEBOOKS), key=lambda nb: not nb.front)[0]
    assert first.name == "01_verdicts"
