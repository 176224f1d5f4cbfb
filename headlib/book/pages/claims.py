"""The Claims page: every claim's value and verdict for this page's (pair, seed) (written to
claims.csv), which model each verdict comes from, and the verdicts of every pair with results."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from headlib.book.keys import page_runs, read_manifest
from headlib.book.plan import NOTEBOOKS, Task, default_out, planned
from headlib.claims import VERDICT_KEYS, claims_table, other_models_note, verdicts
from headlib.config import get_config
from headlib.profiles import PruneConfig, grids
from headlib.pruning.points import SETTINGS, path_name, point_name, scratch_rows
from headlib.settings import results_dir
from headlib.train import release, run_dir
from headlib.train.records import run_record


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


def pending_units(profile: str, pair: str, seed: int, out: Path) -> pd.DataFrame:
    """What the study still lacks (Markdown-ready rows: what, and what it needs): this unit's pages
    not in the book `out`, then the profile's other units (`Grids.units`): one without a release
    needs its training, one released without pages needs them, and one with some of its pages
    needs the others (each with what it needs first, or the command that executes it; no Across
    seeds page for a pair of one seed). The pages executed once per pair (Across seeds) or once in
    all (Domains) are listed on the pair's first seed only."""
    units = grids(profile).units
    one_seed = lambda task: task.nb.across_seeds and sum(u.startswith(f"{task.pair}/") for u in units) < 2
    first_seed = min([int(u.split("/")[1]) for u in units if u.startswith(f"{pair}/")], default=seed)
    once = lambda task: (task.nb.across_seeds or task.nb.pair) and seed != first_seed   # the first seed's page
    fill = {"profile": profile, "pair": pair, "seed": seed}
    rows = [{"unit": f"{task.nb.caption} ({task.pair}, seed {task.seed})", "needs": task.nb.needs.format(**fill)}
            for task in planned(NOTEBOOKS, profile, [pair], [seed])
            if (task.pair == pair or task.nb.pair) and task.nb.needs and not task.output(out).is_file()
            and not one_seed(task) and not once(task)]
    for unit in units:
        other, other_seed = unit.split("/")
        if (other, int(other_seed)) == (pair, seed):
            continue
        other_fill = {"profile": profile, "pair": other, "seed": other_seed}
        run = f"python -m headlib.book run --profile {profile} --pairs {other} --seeds {other_seed}"
        every_page = f"{other}, seed {other_seed}: every page"
        if not (release.release_dir(profile, other, int(other_seed)) / release.CARD).is_file():
            rows.append({"unit": every_page, "needs": NOTEBOOKS[0].needs.format(**other_fill)})
        elif not Task(NOTEBOOKS[0], profile, other, int(other_seed)).output(out).is_file():
            rows.append({"unit": every_page, "needs": f"its pages, from its release: {run}"})
        else:
            rows += [{"unit": f"{task.nb.caption} ({other}, seed {other_seed})",
                      "needs": task.nb.needs.format(**other_fill) or f"its page, from its release: {run} --notebooks "
                                                                     f"{task.nb.name}"}
                     for task in planned(NOTEBOOKS, profile, [other], [int(other_seed)])
                     if task.pair == other and not task.nb.pair and not task.output(out).is_file()
                     and not one_seed(task)]
    return pd.DataFrame(rows, columns=["unit", "needs"])


def done_units(profile: str, pair: str, seed: int, out: Path) -> pd.DataFrame:
    """The measured time of each step behind this unit's pages: training and releasing its model (its
    card) and executing each page before this one (the manifests in the book `out`), in minutes."""
    card = run_record(get_config(profile, [f"train.seed={seed}"], pair=pair)) or {}
    rows = []
    if card.get("steps"):
        rows.append({"step": f"train {pair}, seed {seed} ({card['steps']:,} updates)", "minutes": card["train_minutes"],
                     "command": f"python -m headlib train --profile {profile} --pair {pair} --seed {seed}"})
    if (card.get("release") or {}).get("minutes") is not None:
        rows.append({"step": "release: save the weights and score them on every test set", "minutes":
                     card["release"]["minutes"], "command": f"python -m headlib release --profile {profile} --pair "
                     f"{pair} --seed {seed}"})
    for nb in NOTEBOOKS:
        manifest = read_manifest(Task(nb, profile, pair, seed).output(out)) or {}
        if nb.name != "09_claims" and manifest.get("seconds") is not None:
            rows.append({"step": f"page {nb.caption}", "minutes": round(manifest["seconds"] / 60, 2),
                         "command": f"python -m headlib.book run --profile {profile} --pairs {pair} --seeds {seed} "
                                    f"--notebooks {nb.name}"})
    rows += pruning_units(profile, pair, seed) + lottery_units(profile, pair, seed)
    return pd.DataFrame(rows, columns=["step", "minutes", "command"])


def lottery_units(profile: str, pair: str, seed: int) -> list[dict]:
    """Around's lottery tickets (records under results/.../lottery): each one's training to the
    pruning update plus its retraining from the rewind, in minutes as its record gives them."""
    rows = []
    for path in sorted((results_dir(profile, pair, seed) / "lottery").glob("lottery-*.json")):
        r = json.loads(path.read_text())
        rows.append({"step": f"Around: lottery ticket of {r['k']} encoder heads ({r['prune_at']:,} + "
                             f"{r['ticket_updates']:,} updates)",
                     "minutes": round(r["early"]["minutes"] + r["ticket_minutes"], 2),
                     "command": f"python -m headlib.pruning.lottery --profile {profile} --pair {pair} --seed {seed} "
                                f"--k {r['k']}"})
    return rows


def pruning_units(profile: str, pair: str, seed: int) -> list[dict]:
    """The Sec. 6 units computed so far (their records under results/.../pruning): each setting's
    continuation path with the unpruned model's scoring, its independent validation fine-tunings,
    Beyond's fine-tunings and each from-scratch run; minutes of fine-tuning or training plus scoring (and measuring the
    functions of Fig. 8), as the records give them (a path's points record its fine-tuning minutes
    so far: the last point's are the path's)."""
    out, grid = results_dir(profile, pair, seed) / "pruning", grids(profile)
    where = f"--profile {profile} --pair {pair} --seed {seed}"
    minutes = lambda r: r.get("prune_minutes", 0) + r.get("score_minutes", 0)
    scoring = lambda rows: sum(r.get("score_minutes", 0) + r.get("describe_minutes", 0) for r in rows)
    rows = []
    for setting, kinds in SETTINGS.items():
        section = "6.2" if setting == "encoder" else "6.3"
        path = out / path_name(PruneConfig(kinds=kinds, steps=grid.finetune_steps // grid.path_share))
        if not path.is_file() or not (curve := json.loads(path.read_text()))["finished"]:
            continue
        full = json.loads((out / "full.json").read_text()) if (out / "full.json").is_file() else {}
        points = curve["points"]
        rows.append({"step": f"Sec. {section} path: {len(points)} lambdas x {points[0]['path_updates']} updates, "
                             f"each point scored (and the unpruned model)",
                     "minutes": round(points[-1]["prune_minutes"] + scoring(points + [full]), 2),
                     "command": f"python -m headlib.pruning curve --setting {setting} --no-validate {where}"})
        if (checked := out / f"{'+'.join(kinds)}-path-validation.json").is_file():
            lams = [p["lam"] for p in json.loads(checked.read_text())["points"]]
            independent = [json.loads((out / point_name(PruneConfig(kinds=kinds, lam=lam, steps=grid.finetune_steps,
                                                                    seed=seed))).read_text()) for lam in lams]
            rows.append({"step": f"Sec. {section} validation: {len(lams)} independent fine-tunings x "
                                 f"{grid.finetune_steps} updates, scored",
                         "minutes": round(sum(map(minutes, independent)), 2),
                         "command": f"python -m headlib.pruning curve --setting {setting} {where}"})
    rows += beyond_units(out, profile, pair, seed, minutes)
    for run in scratch_rows(out):
        heads = ", ".join(f"{k} {n}" for k, n in run["retained"].items())
        rows.append({"step": f"from scratch ({heads} heads, {run['steps']:,} updates)", "minutes": run["train_minutes"],
                     "command": f"python -m headlib.pruning scratch --spec '{run['mask']}' --max-steps {run['steps']} "
                                f"{where}"})
    return rows


BEYOND_METHODS = (("dsp", "DSP"), ("fixed", "fixed-mask (random, confidence, LRP, Michel)"))


def beyond_units(out: Path, profile: str, pair: str, seed: int, minutes) -> list[dict]:
    """The fine-tunings of the Beyond page (records of `method` dsp or fixed in `out`), one unit per
    method: how many, and their fine-tuning and scoring minutes summed."""
    records = [json.loads(f.read_text()) for f in sorted(out.glob("enc-self-*-k*.json"))]
    rows = []
    for method, name in BEYOND_METHODS:
        if runs := [r for r in records if r.get("method") == method]:
            steps = sorted({r["prune_config"]["steps"] for r in runs})
            rows.append({"step": f"Beyond: {len(runs)} {name} fine-tunings x {'/'.join(map(str, steps))} updates, scored",
                         "minutes": round(sum(map(minutes, runs)), 2),
                         "command": f"python -m headlib.book run --profile {profile} --pairs {pair} --seeds {seed} "
                                    "--notebooks 08_beyond"})
    return rows
