"""Manifests and keys: what an executed page was computed from, and whether it is current.

Beside each executed page `executed/<pair>/seed<seed>/<name>.ipynb` lies its manifest
`<name>.manifest.json`. Its key hashes the notebook's cells, its parameters, the headlib version,
the outputs of the notebooks it depends on and the upstream artifacts it reads: the model (its
release's weights by fingerprint, else the trained run's record without its wall-clock fields) and
the result tables it names. A page whose key is unchanged is skipped.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Iterable, Sequence

from headlib import __version__
from headlib.book.plan import NOTEBOOKS, BookError, Notebook, Task, clock, default_out, planned
from headlib.book.sources import source_digest
from headlib.files import file_digest
from headlib.settings import rel, settings


def manifest_path(output: Path) -> Path:
    return output.with_name(output.stem + ".manifest.json")


def failed_path(output: Path) -> Path:
    return output.with_name(output.stem + ".failed.ipynb")


def read_manifest(output: Path) -> dict | None:
    path = manifest_path(output)
    if not (output.is_file() and path.is_file()):
        return None
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError:
        return None


def _digest(basis: dict) -> str:
    return hashlib.sha256(json.dumps(basis, sort_keys=True).encode()).hexdigest()[:16]


BASIS = ("notebook", "source", "parameters", "headlib", "upstream")   # what a manifest's key hashes


def model_artifact(cfg) -> dict[str, str]:
    """What a page's key records of the model it reads: its release's weights by fingerprint
    ("models/<profile>/<pair>/seed<seed>/model.safetensors"), else its run's record without the
    clock ("runs/<run>/results.json")."""
    from headlib.train import release
    from headlib.train.records import record_digest, run_record
    from headlib.train import run_dir
    if (path := release.release_of(cfg)) is not None:
        return {f"{rel(path)}/{release.WEIGHTS}": release.read_card(path)["fingerprint"]}
    record = run_record(cfg)
    return {f"runs/{run_dir(cfg).name}/results.json": record_digest(record) if record else "missing"}


def upstream(task: Task, out: Path) -> dict:
    """What a task's output depends on besides its own source and parameters."""
    deps = {}
    for dep in task.nb.after:
        m = read_manifest(task.output(out, dep))
        if m is None:
            raise BookError(f"{task.label} needs the output of {dep} for {task.pair}, seed {task.seed}; "
                            "it has not been executed")
        deps[dep] = m["key"]
    artifacts = {}
    if task.nb.trains:   # the model by its release, else its run's record (this machine's, else the committed one)
        artifacts.update(model_artifact(task.config()))
    if task.nb.reads:
        from headlib.settings import results_dir
        root = results_dir(task.profile, task.pair, task.seed).parent.parent    # results/<profile>/
        for pattern in task.nb.reads:
            for path in sorted(root.glob(pattern.format(pair=task.pair, seed=task.seed))):
                artifacts[f"results/{path.relative_to(root).as_posix()}"] = file_digest(path)
    return {"notebooks": deps, "artifacts": artifacts}


def page_runs(out: Path, profile: str, pair: str, seed: int) -> dict[str, str]:
    """The trained run (its directory name) that each executed page of (pair, seed) read, by
    notebook, from the pages' manifests; pages that read no run are left out."""
    runs = {}
    for nb in NOTEBOOKS:
        manifest = read_manifest(Task(nb, profile, pair, seed).output(out)) or {}
        if (manifest.get("model") or {}).get("run"):
            runs[nb.name] = manifest["model"]["run"]
    return runs


def page_model(task: Task) -> dict | None:
    """The trained model a page of `task` reads: its run, its weights' fingerprint and its release
    (None where it has none), or None for a page that reads no trained model."""
    if not task.nb.trains:
        return None
    from headlib.train import release
    from headlib.train.records import run_record
    from headlib.train import run_dir
    path = release.release_of(task.config())
    record = run_record(task.config()) or {}
    return {"run": record.get("run_dir", run_dir(task.config()).name), "fingerprint": record.get("fingerprint"),
            "release": rel(path) if path else None}


def task_key(task: Task, source: Path, out: Path) -> tuple[str, dict]:
    basis = {"notebook": task.nb.name, "source": source_digest(source), "parameters": task.parameters,
             "headlib": __version__, "upstream": upstream(task, out)}
    return _digest(basis), basis


def changes(task: Task, out: Path, src_dir: Path | None = None) -> list[str]:
    """What differs from the inputs the task's output was executed with (its manifest): empty when
    the output is current, e.g. ["source", "artifact results/en-fr/seed1/head_profiles.json"]."""
    manifest = read_manifest(task.output(out))
    if manifest is None:
        return ["no output"]
    src_dir = src_dir or settings().notebooks
    try:
        _, basis = task_key(task, src_dir / f"{task.nb.name}.ipynb", out)
    except BookError as e:
        return [str(e)]
    changed = [k for k in ("source", "parameters", "headlib") if manifest.get(k) != basis[k]]
    for group in ("notebooks", "artifacts"):
        then, now = manifest.get("upstream", {}).get(group, {}), basis["upstream"][group]
        changed += [f"{group[:-1]} {name}" for name in sorted(then.keys() | now.keys()) if then.get(name) != now.get(name)]
    return changed


def status(profile: str = "cpu", pairs: Iterable[str] = ("en-de",), seeds: Iterable[int] = (1,),
           out: str | Path | None = None, notebooks: Sequence[Notebook] = NOTEBOOKS,
           src_dir: Path | None = None) -> list[tuple[Task, list[str]]]:
    """Each run of `run(profile, pairs, seeds)` with what would make it execute (empty: it would
    be skipped). A run after one that will execute is marked too: its upstream key will change.
    Fixed-pair notebooks a run does not name are kept by `run` whatever this says."""
    out = Path(out) if out else default_out(profile)
    result, executes = [], set()
    for task in planned(notebooks, profile, list(pairs), [int(s) for s in seeds]):
        why = changes(task, out, src_dir)
        why += [f"after {dep} (re-executed)" for dep in task.nb.after if (dep, task.pair, task.seed) in executes]
        if why:
            executes.add((task.nb.name, task.pair, task.seed))
        result.append((task, why))
    return result


def seconds_per_update(cfg) -> tuple[float, str] | None:
    """Measured training cost of `cfg`'s model: seconds per update of its own committed record,
    else the mean over the profile's other committed records; with where it was measured."""
    from headlib.settings import results_dir
    from headlib.train.records import committed_record
    own = committed_record(cfg)
    records = [own] if own else [json.loads(p.read_text()) for p in
                                 sorted(results_dir(cfg.profile, cfg.data.pair, 1).parent.parent.glob(
                                     "*/seed*/training_results.json"))]
    rates = [r["train_minutes"] * 60 / r["steps"] for r in records if r.get("steps")]
    if not rates:
        return None
    where = "its committed record" if own else f"{len(rates)} committed {cfg.profile} record(s)"
    return sum(rates) / len(rates), where


def estimate(plan: Sequence[tuple[Task, list[str]]], out: Path) -> tuple[float, list[str]]:
    """Seconds that executing the tasks of `plan` (from `status`) that would execute costs: each
    page at its last measured time (its manifest), each training it needs (a unit with neither a
    release nor a finished run, once) at `seconds_per_update`; and a line for each part of it, the
    unmeasured ones included."""
    from headlib.train.release import release_of
    from headlib.train import run_dir
    total, lines, trained = 0.0, [], set()
    for task, why in plan:
        if not why:
            continue
        cfg = task.config()
        if (task.nb.trains and (task.pair, task.seed) not in trained and release_of(cfg) is None
                and not (run_dir(cfg) / "results.json").is_file()):
            trained.add((task.pair, task.seed))
            rate = seconds_per_update(cfg)
            if rate is None:
                lines.append(f"training {task.pair} seed {task.seed}: not measured for the {task.profile} profile")
            else:
                total += rate[0] * cfg.train.max_steps
                lines.append(f"training {task.pair} seed {task.seed}: {clock(rate[0] * cfg.train.max_steps)} "
                             f"({cfg.train.max_steps:,} updates at {rate[0]:.2f} s each, from {rate[1]})")
        seconds = (read_manifest(task.output(out)) or {}).get("seconds")
        total += seconds or 0.0
        lines.append(f"{task.label}: {clock(seconds) + ' (last execution)' if seconds else 'never measured'}")
    return total, lines
