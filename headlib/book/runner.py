"""The book runner: execute the study's notebooks with papermill into the Jupyter Book.

    python -m headlib.book run   --profile cpu [--pairs en-de,en-fr,en-ru] [--seeds 1,2,3] [--out DIR]
    python -m headlib.book check [--out DIR]   a consistent book: one model per (pair, seed), pages
                                               executed from today's notebooks, honest manifests,
                                               every glue reference defined, every notebook parametrized
    python -m headlib.book build [--out DIR]   strict Jupyter Book build (-W -n --keep-going)

A book directory (`book/` for the cpu profile, whose outputs are committed; `artifacts/book-<profile>/`
for any other profile, so that smoke runs never overwrite them) looks like this:

    intro.md, reproduce.md, ...        hand-written pages; their sources live in book/ and are
                                       copied into any other book directory
    _config.yml                        (only outside book/; book/ uses the repository's own)
    _toc.yml                           generated: the hand-written pages plus every executed notebook
    executed/<pair>/seed<seed>/<name>.ipynb          notebooks/<name>.ipynb executed for one pair
                                                     and seed: a page of the book
    executed/<pair>/seed<seed>/<name>.manifest.json  what that output was executed from

Each (notebook, pair, seed) is executed with the parameters `profile`, `pairs` (the one pair) and
`seed`, so batch reruns write each pair and seed into its own output and a run for one pair keeps
the outputs of the others. A notebook is skipped when its manifest key is unchanged: the key
hashes the notebook's cells, its parameters, the headlib version, the outputs of the notebooks it
depends on and the upstream artifacts it reads (the trained run's record without its wall-clock
fields: this machine's, else the committed one, so a fresh clone trains nothing to skip a notebook).
Notebooks run in dependency order. A notebook is executed into a temporary file that replaces the
previous output only on success; a failure stops the run with the cell and the error, keeps the previous good
output, and leaves the failed execution beside it as `<name>.failed.ipynb` (git-ignored).

Pages state their profile, pair and seed in prose, so the parameters cell (tagged `remove-cell` in
the source) and papermill's injected-parameters cell (tagged by the runner) are not rendered.
"""
from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Sequence

from headlib import __version__
from headlib.book.glue_refs import check_glue, glue_definitions, glue_references, glued_text, read_notebook
from headlib.book.pages import OTHER_MODELS
from headlib.files import artifacts_dir, file_digest, write_json, write_text
from headlib.settings import settings

PARAMETERS = ("profile", "pairs", "seed")   # what every notebook's `parameters` cell declares


@dataclass(frozen=True)
class Notebook:
    """A notebook of the study, executed once per (pair, seed)."""
    name: str                      # notebooks/<name>.ipynb
    caption: str                   # its part of the table of contents
    after: tuple[str, ...] = ()    # notebooks (same pair and seed) whose outputs it reads
    trains: bool = False           # reads the trained run of (profile, pair, seed)
    reads: tuple[str, ...] = ()    # result tables it reads, in its key: globs under results/<profile>/
                                   # with {pair} and {seed} filled in (other pairs' tables too)
    across_seeds: bool = False     # compares every seed of its pair: executed for the run's first seed only
    pair: str = ""                 # a fixed pair (the notebook trains its own models): executed once, for
                                   # this pair and the run's first seed, when the run names the pair or
                                   # the output is missing (else the output is kept, like other pairs')
    on_imported: bool = True       # runs on an imported model (the pretrained profile); not a page that
                                   # compares training seeds or trains models of its own


# In dependency order of the paper's sections; `after` makes the order explicit.
NOTEBOOKS: tuple[Notebook, ...] = (
    Notebook("03_data_and_models", "Sec. 3 — Data and models", trains=True),
    Notebook("04_important_heads", "Sec. 4 — Important heads", after=("03_data_and_models",), trains=True),
    Notebook("05_head_functions", "Sec. 5 — Characterizing heads", after=("04_important_heads",), trains=True),
    Notebook("06_pruning_encoder", "Sec. 6.2 — Pruning the encoder", after=("05_head_functions",), trains=True),
    Notebook("07_pruning_all_attention", "Sec. 6.3 — Pruning all attention", after=("06_pruning_encoder",), trains=True),
    Notebook("08_beyond", "Beyond the paper", after=("06_pruning_encoder",), trains=True),
    # trains its own domain models; before 10_around, which reads its adaptation table (A7)
    Notebook("12_domains", "Domains and adaptation (en-ru)", pair="en-ru", on_imported=False),
    Notebook("10_around", "Around the paper", after=("04_important_heads", "06_pruning_encoder"), trains=True,
             reads=("{pair}/seed{seed}/pruning/enc-self-lam*.json",   # A6: Hard Concrete's encoder points
                    "{pair}/seed{seed}/pruning/scratch-*.json",        # and their from-scratch runs
                    "en-ru.news/seed{seed}/adaptation.csv",           # A7's verdict (12_domains)
                    "*/seed{seed}/head_profiles.json")),              # A5: each compared pair's heads
    Notebook("09_claims", "Claims", after=("05_head_functions",), reads=tuple(
        f"*/seed{{seed}}/{name}" for name in ("head_importance.csv", "positional_heads.csv", "syntactic_best.csv",
                                              "rare_word_rates.csv", "pruning_*.csv"))),
    Notebook("11_seeds", "Across seeds", after=("05_head_functions",), across_seeds=True, on_imported=False,
             reads=("{pair}/seed*/*.csv", "{pair}/seed*/training_results.json")),
)

# Hand-written pages: the root, and parts after the notebooks' parts.
ROOT_PAGE = "intro"
CLOSING_PARTS = (("Using this book", ("reproduce",)),)


class BookError(RuntimeError):
    """A notebook failed, or the book is inconsistent; the message says where."""


def default_out(profile: str) -> Path:
    """`book/` for the cpu profile (committed); `artifacts/book-<profile>/` for the others."""
    return settings().book if profile == "cpu" else settings().artifacts / f"book-{profile}"


# -- notebooks and manifests ---------------------------------------------------------------------

def parameters_cell(path: Path) -> dict:
    """The code cell tagged `parameters` (papermill's convention); an error if there is none."""
    for cell in read_notebook(path).cells:
        if cell.cell_type == "code" and "parameters" in cell.get("metadata", {}).get("tags", []):
            return cell
    raise BookError(f"{path}: no code cell tagged 'parameters' (papermill needs one; "
                    f"it must assign {', '.join(PARAMETERS)})")


def notebook_parameters(path: Path) -> list[str]:
    """Names assigned in the parameters cell."""
    return re.findall(r"^([A-Za-z_]\w*)\s*(?::[^=]+)?=", parameters_cell(path).source, flags=re.M)


def check_parameters(path: Path) -> None:
    missing = [p for p in PARAMETERS if p not in notebook_parameters(path)]
    if missing:
        raise BookError(f"{path}: the parameters cell does not assign {', '.join(missing)}")


def code_size(path: Path) -> tuple[int, list[str]]:
    """How much logic a notebook holds: its lines of code (not blank, not comments) and its loops
    (`for`, `while` and comprehensions, each as the first line of its statement). A page is prose,
    headlib calls, a plot and glue: its tables and files come from tested calls."""
    lines, loops = 0, []
    for cell in read_notebook(path).cells:
        if cell.cell_type != "code":
            continue
        lines += sum(1 for line in cell.source.splitlines() if line.strip() and not line.strip().startswith("#"))
        starts = sorted(node.lineno for node in ast.walk(ast.parse(cell.source))
                        if isinstance(node, (ast.For, ast.While, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)))
        loops += [cell.source.splitlines()[n - 1].strip() for n in starts]
    return lines, loops


def source_digest(path: Path) -> str:
    """Hash of what a notebook computes: cell types, sources and tags (not outputs or metadata)."""
    cells = [[c.cell_type, c.source, sorted(c.get("metadata", {}).get("tags", []))] for c in read_notebook(path).cells]
    return hashlib.sha256(json.dumps(cells).encode()).hexdigest()[:16]


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


@dataclass(frozen=True)
class Task:
    nb: Notebook
    profile: str
    pair: str
    seed: int

    @property
    def label(self) -> str:
        return f"{self.nb.name} [{self.pair}, seed {self.seed}]"

    @property
    def parameters(self) -> dict:
        return {"profile": self.profile, "pairs": self.pair, "seed": self.seed}

    def output(self, out: Path, name: str | None = None) -> Path:
        return out / "executed" / self.pair / f"seed{self.seed}" / f"{name or self.nb.name}.ipynb"

    def config(self):
        from headlib.config import get_config
        return get_config(self.profile, [f"train.seed={self.seed}"], pair=self.pair)


def ordered(notebooks: Sequence[Notebook]) -> list[Notebook]:
    """Topological order by `after` (stable: the given order where there is no constraint)."""
    by_name = {nb.name: nb for nb in notebooks}
    done: list[Notebook] = []
    visiting: set[str] = set()

    def visit(nb: Notebook):
        if nb in done:
            return
        if nb.name in visiting:
            raise BookError(f"notebook dependency cycle through {nb.name}")
        visiting.add(nb.name)
        for dep in nb.after:
            if dep not in by_name:
                if any(dep == other.name for other in NOTEBOOKS):
                    continue   # not run this time: its outputs are read as they are (see `upstream`)
                raise BookError(f"{nb.name} runs after {dep}, which is not a notebook of the book")
            visit(by_name[dep])
        visiting.discard(nb.name)
        done.append(nb)

    for nb in notebooks:
        visit(nb)
    return done


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
    if task.nb.trains:   # the run by its record (this machine's, else the committed one), clock left out
        from headlib.train.records import record_digest, run_record
        from headlib.train.trainer import run_dir
        record = run_record(task.config())
        artifacts[f"runs/{run_dir(task.config()).name}/results.json"] = record_digest(record) if record else "missing"
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
        for key in manifest.get("upstream", {}).get("artifacts", {}):
            if key.startswith("runs/"):
                runs[nb.name] = key.split("/")[1]
    return runs


def _digest(basis: dict) -> str:
    return hashlib.sha256(json.dumps(basis, sort_keys=True).encode()).hexdigest()[:16]


BASIS = ("notebook", "source", "parameters", "headlib", "upstream")   # what a manifest's key hashes


def page_model(task: Task) -> dict | None:
    """The trained model a page of `task` reads: its run and its weights' fingerprint (from the
    run's record), or None for a page that reads no trained model."""
    if not task.nb.trains:
        return None
    from headlib.train.records import run_record
    from headlib.train.trainer import run_dir
    record = run_record(task.config()) or {}
    return {"run": run_dir(task.config()).name, "fingerprint": record.get("fingerprint")}


def task_key(task: Task, source: Path, out: Path) -> tuple[str, dict]:
    basis = {"notebook": task.nb.name, "source": source_digest(source), "parameters": task.parameters,
             "headlib": __version__, "upstream": upstream(task, out)}
    return _digest(basis), basis


# -- execution -----------------------------------------------------------------------------------

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _clock(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}"


def _rel(path: Path) -> str:
    try:
        return path.resolve().relative_to(settings().root).as_posix()
    except ValueError:
        return str(path)


def execute(task: Task, source: Path, output: Path, progress: bool = True, log_output: bool = False) -> None:
    """Execute `source` into `output` atomically; on failure raise BookError naming the cell."""
    import nbformat
    import papermill as pm
    from papermill.exceptions import PapermillExecutionError

    output.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{output.stem}.", suffix=".tmp.ipynb", dir=output.parent)
    os.close(fd)
    tmp = Path(tmp)
    try:
        try:
            pm.execute_notebook(str(source), str(tmp), parameters=task.parameters, kernel_name="python3",
                                cwd=str(settings().root), progress_bar=progress, log_output=log_output)
        except PapermillExecutionError as e:
            failed = failed_path(output)
            shutil.copyfile(tmp, failed)
            trace = _ANSI.sub("", "\n".join(e.traceback))
            kept = f"the previous output {_rel(output)} is kept" if output.is_file() else "there was no previous output"
            raise BookError(
                f"{task.label} failed in cell {e.cell_index} (execution count {e.exec_count}) of "
                f"{_rel(source)}:\n\n{e.source}\n\n{trace}\n\n{e.ename}: {e.evalue}\n"
                f"({kept}; the failed execution is in {_rel(failed)})") from None
        nb = read_notebook(tmp)
        meta = nb.metadata.get("papermill", {})   # no temporary or machine-specific paths in the book
        meta["input_path"], meta["output_path"] = _rel(source), _rel(output)
        for cell in nb.cells:   # the page shows its parameters in prose; hide papermill's cell too
            tags = cell.get("metadata", {}).get("tags", [])
            if "injected-parameters" in tags and "remove-cell" not in tags:
                tags.append("remove-cell")
        nbformat.write(nb, str(tmp))
        tmp.chmod(0o644)
        os.replace(tmp, output)
    finally:
        tmp.unlink(missing_ok=True)
    failed_path(output).unlink(missing_ok=True)


@dataclass
class TaskResult:
    task: Task
    status: str          # "executed" or "skipped"
    seconds: float
    output: Path


def prepare_out(out: Path, profile: str, force: bool = False) -> None:
    """Copy the hand-written pages and the config into a book directory other than book/; refuse to
    mix profiles in one book directory."""
    if out.resolve() == settings().book.resolve() and profile != "cpu" and not force:
        raise BookError(f"book/ holds the committed outputs of the cpu profile; the {profile} profile's book "
                        f"goes to {_rel(default_out(profile))} (or another --out)")
    out.mkdir(parents=True, exist_ok=True)
    others = {json.loads(p.read_text()).get("profile") for p in (out / "executed").glob("*/*/*.manifest.json")}
    others.discard(profile)
    if others and not force:
        raise BookError(f"{_rel(out)} holds outputs of profile {', '.join(sorted(others))}, not {profile}; "
                        f"use --out (default for {profile}: {_rel(default_out(profile))}) or --force")
    if out.resolve() == settings().book.resolve():
        return
    for item in settings().book.iterdir():
        if item.name in ("_build", "executed", "_toc.yml") or item.name.startswith("."):
            continue
        if item.is_dir():
            shutil.copytree(item, out / item.name, dirs_exist_ok=True)
        else:
            shutil.copy2(item, out / item.name)
    shutil.copy2(settings().root / "_config.yml", out / "_config.yml")


def select(names: Iterable[str]) -> tuple[Notebook, ...]:
    """The notebooks named (in the book's order); an unknown name is an error listing the valid ones."""
    known = {nb.name: nb for nb in NOTEBOOKS}
    names = [n.strip() for n in names if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise BookError(f"unknown notebook(s) {', '.join(unknown)}; valid: {', '.join(known)}")
    return tuple(nb for nb in NOTEBOOKS if nb.name in names)


def planned(notebooks: Sequence[Notebook], profile: str, pairs: list[str], seeds: list[int]) -> list[Task]:
    """The (notebook, pair, seed) runs of a book run, in dependency order (for an imported model,
    only the notebooks that run `on_imported`)."""
    from headlib.train import pretrained
    runs = [nb for nb in ordered(notebooks) if nb.on_imported or profile != pretrained.PROFILE]
    return [Task(nb, profile, pair, seed) for nb in runs for pair in ([nb.pair] if nb.pair else pairs)
            for seed in (seeds[:1] if nb.across_seeds or nb.pair else seeds)]


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
    page at its last measured time (its manifest), each training it needs at `seconds_per_update`;
    and a line for each part of it, the unmeasured ones included."""
    from headlib.train.trainer import run_dir
    total, lines = 0.0, []
    for task, why in plan:
        if not why:
            continue
        if task.nb.trains and not (run_dir(cfg := task.config()) / "results.json").is_file():
            rate = seconds_per_update(cfg)
            if rate is None:
                lines.append(f"training {task.pair} seed {task.seed}: not measured for the {task.profile} profile")
            else:
                total += rate[0] * cfg.train.max_steps
                lines.append(f"training {task.pair} seed {task.seed}: {_clock(rate[0] * cfg.train.max_steps)} "
                             f"({cfg.train.max_steps:,} updates at {rate[0]:.2f} s each, from {rate[1]})")
        seconds = (read_manifest(task.output(out)) or {}).get("seconds")
        total += seconds or 0.0
        lines.append(f"{task.label}: {_clock(seconds) + ' (last execution)' if seconds else 'never measured'}")
    return total, lines


def run(profile: str = "cpu", pairs: Iterable[str] = ("en-de",), seeds: Iterable[int] = (1,),
        out: str | Path | None = None, force: bool = False, progress: bool = True, log_output: bool = False,
        notebooks: Sequence[Notebook] = NOTEBOOKS, src_dir: Path | None = None,
        log: Callable[[str], None] | None = None, toc: Sequence[Notebook] | None = None) -> list[TaskResult]:
    """Execute every (notebook, pair, seed) whose key changed, in dependency order; write the toc
    over `toc` (default: `notebooks`; a run of a subset passes the whole book)."""
    from headlib.config import get_config
    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    src_dir = src_dir or settings().notebooks
    out = Path(out) if out else default_out(profile)
    pairs, seeds = list(pairs), [int(s) for s in seeds]
    for pair in pairs:
        get_config(profile, pair=pair)   # validates profile and pair
    # The kernels must see the same artifacts as this process, whatever their working directory.
    os.environ.setdefault("HEADLIB_ARTIFACTS", str(artifacts_dir()))
    prepare_out(out, profile, force)
    tasks = planned(notebooks, profile, pairs, seeds)
    for nb in notebooks:
        check_parameters(src_dir / f"{nb.name}.ipynb")
    log(f"[book] profile {profile}: {len(tasks)} notebook run(s) into {_rel(out)}")
    plan = [(t, why or (["--force"] if force else [])) for t, why in status(profile, pairs, seeds, out, notebooks, src_dir)]
    seconds, parts = estimate(plan, out)
    if parts:
        log(f"[book] estimate: about {_clock(seconds)} for {sum(bool(w) for _, w in plan)} page(s), as measured "
            "before (machines differ):\n  " + "\n  ".join(parts))
    t0, results = time.time(), []
    try:
        for i, task in enumerate(tasks, 1):
            head = f"[book {_clock(time.time() - t0)}] {i}/{len(tasks)} {task.label}"
            source, output = src_dir / f"{task.nb.name}.ipynb", task.output(out, task.nb.name)
            key, basis = task_key(task, source, out)
            manifest = read_manifest(output)
            if manifest and task.nb.pair and task.nb.pair not in pairs:
                log(f"{head}: kept ({task.pair} is not among this run's pairs; "
                    f"--pairs {','.join(pairs + [task.pair])} reruns it; {len(tasks) - i} left)")
                results.append(TaskResult(task, "skipped", 0.0, output))
                continue
            if manifest and manifest.get("key") == key and not force:
                log(f"{head}: unchanged, skipped ({len(tasks) - i} left)")
                results.append(TaskResult(task, "skipped", 0.0, output))
                continue
            if task.nb.trains:   # the model is needed now: train it, or replay the committed run
                from headlib.train.trainer import run_dir, train
                if not (run_dir(task.config()) / "results.json").is_file():
                    log(f"{head}: training {task.pair} ({profile} profile, seed {task.seed}) -> {_rel(run_dir(task.config()))}")
                train(task.config(), progress=progress)
                head = f"[book {_clock(time.time() - t0)}] {i}/{len(tasks)} {task.label}"
                key, basis = task_key(task, source, out)   # this machine's record now
            log(f"{head}: executing -> {_rel(output)} ({len(tasks) - i} left after this)")
            start = time.time()
            execute(task, source, output, progress=progress, log_output=log_output)
            seconds = time.time() - start
            # A table the notebook read may be a cache it filled itself (the cross-lingual head profiles):
            # the output goes with the tables as they are now, so the next run finds it unchanged.
            basis["upstream"] = upstream(task, out)
            key = _digest(basis)
            others = glued_text(output, OTHER_MODELS)
            write_json(manifest_path(output), basis | {"key": key, "profile": profile, "model": page_model(task),
                                                       "other_models": json.loads(others) if others else [],
                                                       "seconds": round(seconds, 1),
                                                       "executed_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}).chmod(0o644)
            log(f"[book {_clock(time.time() - t0)}] {i}/{len(tasks)} {task.label}: done in {_clock(seconds)}")
            results.append(TaskResult(task, "executed", seconds, output))
    finally:
        write_toc(out, profile, notebooks if toc is None else toc)
    ran = sum(r.status == "executed" for r in results)
    log(f"[book {_clock(time.time() - t0)}] {ran} executed, {len(results) - ran} skipped; toc: {_rel(out / '_toc.yml')}")
    return results


# -- table of contents ---------------------------------------------------------------------------

def executed_outputs(out: Path, nb: Notebook, profile: str) -> list[tuple[str, int, Path]]:
    """(pair, seed, path) of every good output of `nb` in a book directory, in a stable order."""
    from headlib.data.corpora import PAIRS
    found = []
    for m in (out / "executed").glob(f"*/seed*/{nb.name}.manifest.json"):
        output = m.with_name(f"{nb.name}.ipynb")
        manifest = read_manifest(output)
        if manifest and manifest.get("profile") == profile:
            pair, seed = m.parent.parent.name, int(m.parent.name[len("seed"):])
            found.append((pair, seed, output))
    rank = {p: i for i, p in enumerate(PAIRS)}
    return sorted(found, key=lambda f: (rank.get(f[0], len(rank)), f[0], f[1]))


def write_toc(out: Path, profile: str, notebooks: Sequence[Notebook] = NOTEBOOKS) -> Path:
    """The book's table of contents: the root page, a part per notebook with its executed pages, the
    closing pages. A book of some pages only (say the pretrained profile's Sec. 3-5) leaves out the
    hand-written pages that cite the others, and gets a root page of its own (`partial_root`)."""
    import yaml
    parts = []
    for nb in ordered(notebooks):
        chapters = [{"file": p.relative_to(out).with_suffix("").as_posix(), "title": f"{pair}, seed {seed}"}
                    for pair, seed, p in executed_outputs(out, nb, profile)]
        if chapters:
            parts.append({"caption": nb.caption, "chapters": chapters})
    citing = pages_citing_missing(out) if out.resolve() != settings().book.resolve() else set()
    for page in citing:
        (out / f"{page}.md").unlink()
    if ROOT_PAGE in citing:
        write_text(out / f"{ROOT_PAGE}.md", partial_root(profile, [part["caption"] for part in parts]))
    for caption, files in CLOSING_PARTS:
        if kept := [{"file": f} for f in files if f not in citing]:
            parts.append({"caption": caption, "chapters": kept})
    toc = {"format": "jb-book", "root": ROOT_PAGE, "parts": parts}
    header = (f"# Generated by `python -m headlib.book run` (headlib/book/runner.py) from the executed notebooks\n"
              f"# of the {profile} profile; do not edit by hand.\n")
    path = write_text(out / "_toc.yml", header + yaml.safe_dump(toc, sort_keys=False, allow_unicode=True))
    path.chmod(0o644)
    return path


def pages_citing_missing(out: Path) -> set[str]:
    """The hand-written pages of a book directory that cite glue of a notebook it has not executed."""
    defined = glue_definitions(out)
    return {ref.page for ref in glue_references(out)
            if not ref.page.startswith("executed/") and ref.doc.startswith("executed/") and ref.doc not in defined}


def partial_root(profile: str, captions: list[str]) -> str:
    """The root page of a book that holds some of the study's pages only."""
    listed = "\n".join(f"- {caption}" for caption in captions)
    return (f"# headlib: the {profile} profile\n\nThis book holds some of the study's pages only, computed with the "
            f"`{profile}` profile:\n\n{listed}\n\nThe introduction, which cites every page, and the Reproduce page "
            "are in the full book (`make book`).\n")


def check_manifests(out: Path, src_dir: Path | None = None) -> list[str]:
    """Each executed page against its manifest and its notebook: the key is the hash of the basis
    the manifest records, and the source digest is that of `src_dir`'s notebook today."""
    src_dir = src_dir or settings().notebooks
    problems = []
    for path in sorted((out / "executed").glob("*/seed*/*.manifest.json")):
        page = path.relative_to(out).as_posix().removesuffix(".manifest.json")
        manifest = json.loads(path.read_text())
        recorded = {k: manifest.get(k) for k in BASIS}
        if _digest(recorded) != manifest.get("key"):
            problems.append(f"{page}: its manifest's key {manifest.get('key')} is not the hash of the basis it records "
                            f"({_digest(recorded)}): the manifest was edited, or written without executing the page")
        source = src_dir / f"{manifest.get('notebook')}.ipynb"
        if source.is_file() and manifest.get("source") != (now := source_digest(source)):
            problems.append(f"{page}: executed from another source of {_rel(source)} (digest {manifest.get('source')}, "
                            f"today {now}); re-execute it")
    return problems


def check_models(out: Path) -> list[str]:
    """One model per (pair, seed): every page that reads a trained model reads the one of its
    (pair, seed)'s Sec. 3 page, by the weights' fingerprint (a model retrained elsewhere is
    another model, even under the same run name); the other models a page names (`OTHER_MODELS`)
    carry their fingerprints."""
    problems, first = [], NOTEBOOKS[0].name
    for folder in sorted((out / "executed").glob("*/seed*")):
        sec3 = read_manifest(folder / f"{first}.ipynb") or {}
        ref = sec3.get("model") or {}
        for path in sorted(folder.glob("*.manifest.json")):
            page = path.relative_to(out).as_posix().removesuffix(".manifest.json")
            manifest = json.loads(path.read_text())
            problems += [f"{page}: names model {m.get('run')} ({m.get('role')}) without its weights' fingerprint; "
                         "retrain it or re-execute the page" for m in manifest.get("other_models", []) if not m.get("fingerprint")]
            reads_run = any(k.startswith("runs/") for k in manifest.get("upstream", {}).get("artifacts", {}))
            model = manifest.get("model") or {}
            if not (reads_run or model):
                continue
            if not model.get("fingerprint"):
                problems.append(f"{page}: its manifest records no model fingerprint (executed before they were recorded); "
                                "re-execute it")
            elif not ref.get("fingerprint"):
                problems.append(f"{page}: reads model {model['run']} ({model['fingerprint']}), but the Sec. 3 page of "
                                f"{folder.parent.name}, {folder.name} records no model to compare with")
            elif model["fingerprint"] != ref["fingerprint"]:
                problems.append(f"{page}: reads model {model['run']} ({model['fingerprint']}), not the Sec. 3 model of "
                                f"{folder.parent.name}, {folder.name}: {ref['run']} ({ref['fingerprint']})")
    return problems


def check(out: Path, src_dir: Path | None = None) -> list[str]:
    """Everything that makes a book inconsistent, one line each naming the page (empty: consistent)."""
    src_dir = src_dir or settings().notebooks
    problems = []
    for path in sorted(src_dir.glob("*.ipynb")):
        try:
            check_parameters(path)
        except BookError as e:
            problems.append(str(e))
    return problems + check_manifests(out, src_dir) + check_models(out) + check_glue(out)


# -- build ---------------------------------------------------------------------------------------

def build(out: Path, strict: bool = True) -> subprocess.CompletedProcess:
    """`jupyter-book build OUT -W -n --keep-going`; output in OUT/_build/html."""
    exe = Path(sys.executable).parent / "jupyter-book"
    cmd = [str(exe) if exe.exists() else "jupyter-book", "build", str(out)]
    if strict:
        cmd += ["-W", "-n", "--keep-going"]
    return subprocess.run(cmd, capture_output=True, text=True)


def main(argv=None) -> int:
    from headlib.config import PROFILES
    from headlib.data.corpora import PAIRS
    parser = argparse.ArgumentParser(prog="python -m headlib.book", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("run", "status", "check", "build"):
        p = sub.add_parser(name)
        p.add_argument("--profile", default="cpu", choices=list(PROFILES))
        p.add_argument("--out", help="book directory (default: book/ for cpu, artifacts/book-<profile>/ otherwise)")
        if name in ("run", "status"):
            p.add_argument("--pairs", default="en-de", help=f"comma-separated, from {', '.join(PAIRS)}")
            p.add_argument("--seeds", default="1", help="comma-separated training seeds")
        if name == "run":
            p.add_argument("--notebooks", default="", help="comma-separated notebook names to run (default: all); "
                           "the others' outputs must exist where these read them")
            p.add_argument("--force", action="store_true", help="execute even when nothing changed")
            p.add_argument("--log-output", action="store_true", help="stream the notebooks' outputs")
            p.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    out = Path(args.out) if args.out else default_out(args.profile)
    try:
        if args.command == "run":
            chosen = select(args.notebooks.split(",")) if args.notebooks else NOTEBOOKS
            run(args.profile, [p for p in args.pairs.split(",") if p], [int(s) for s in args.seeds.split(",") if s],
                out, force=args.force, progress=not args.no_progress, log_output=args.log_output, notebooks=chosen,
                toc=NOTEBOOKS)
            problems = check(out)
            for p in problems:
                print(f"warning: {p}", file=sys.stderr)
            return 0
        if args.command == "status":
            plan = status(args.profile, [p for p in args.pairs.split(",") if p],
                          [int(s) for s in args.seeds.split(",") if s], out)
            for task, why in plan:
                print(f"{task.label}: {'would execute: ' + '; '.join(why) if why else 'current'}")
            seconds, _ = estimate(plan, out)
            print(f"estimate: about {_clock(seconds)} (pages and trainings at their measured times)")
            return 0
        if args.command == "check":
            problems = check(out)
            for p in problems:
                print(p, file=sys.stderr)
            return 1 if problems else 0
        result = build(out)
        sys.stdout.write(result.stdout)
        sys.stderr.write(result.stderr)
        return result.returncode
    except (BookError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
