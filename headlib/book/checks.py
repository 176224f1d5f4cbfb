"""Is the book one consistent whole? Every problem is one line naming the page.

    - every notebook declares the parameters (profile, pair, seed);
    - every executed page was executed from today's notebook, and its manifest's key is the hash
      of the basis it records;
    - one model per (pair, seed): every page that reads a model reads its unit's release (by the
      weights' fingerprint), or, where a unit has no release, the model of its Sec. 3 page; in the
      committed book every unit with pages has a release;
    - every glue reference is defined.
"""
from __future__ import annotations

import json
from pathlib import Path

from headlib.book.glue_refs import check_glue
from headlib.book.keys import BASIS, _digest, read_manifest
from headlib.book.plan import NOTEBOOKS, BookError
from headlib.book.sources import check_parameters, source_digest
from headlib.settings import rel, settings


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
            problems.append(f"{page}: executed from another source of {rel(source)} (digest {manifest.get('source')}, "
                            f"today {now}); re-execute it")
    return problems


def unit_release(out: Path, pair: str, seed: int) -> dict | None:
    """The card of the release of a book's unit (the profile its Sec. 3 page was executed with), or None."""
    from headlib.train import release
    sec3 = read_manifest(out / "executed" / pair / f"seed{seed}" / f"{NOTEBOOKS[0].name}.ipynb") or {}
    path = release.release_dir(sec3.get("profile", "cpu"), pair, seed)
    return release.read_card(path) if (path / release.CARD).is_file() else None


def check_models(out: Path, require_release: bool | None = None) -> list[str]:
    """One model per (pair, seed): every page that reads a trained model reads its unit's release,
    by the weights' fingerprint, or, for a unit with no release, the model of its Sec. 3 page (a
    model retrained elsewhere is another model, even under the same run name); the other models a
    page names (`OTHER_MODELS`) carry their fingerprints. `require_release` (default: for the
    committed book): a unit with pages must have a release, else no page of it can be re-executed."""
    require_release = out.resolve() == settings().book.resolve() if require_release is None else require_release
    problems, first = [], NOTEBOOKS[0].name
    for folder in sorted((out / "executed").glob("*/seed*")):
        pair, seed = folder.parent.name, int(folder.name.removeprefix("seed"))
        card = unit_release(out, pair, seed)
        sec3 = read_manifest(folder / f"{first}.ipynb") or {}
        ref = ({"run": card["run_dir"], "fingerprint": card["fingerprint"],
                "what": f"release {card['release']['path']}"} if card else {**(sec3.get("model") or {}), "what": f"the Sec. 3 model of {pair}, {folder.name}"})
        if require_release and card is None:
            problems.append(f"{rel(folder)}: {pair}, seed {seed} has pages but no release (models/.../{pair}/"
                            f"{folder.name}): its pages cannot be re-executed; release its model or remove them")
        for path in sorted(folder.glob("*.manifest.json")):
            page = path.relative_to(out).as_posix().removesuffix(".manifest.json")
            manifest = json.loads(path.read_text())
            problems += [f"{page}: names model {m.get('run')} ({m.get('role')}) without its weights' fingerprint; "
                         "retrain it or re-execute the page" for m in manifest.get("other_models", []) if not m.get("fingerprint")]
            read = manifest.get("upstream", {}).get("artifacts", {})
            reads_model = any(k.startswith(("runs/", "models/")) for k in read)
            model = manifest.get("model") or {}
            if not (reads_model or model):
                continue
            if not model.get("fingerprint"):
                problems.append(f"{page}: its manifest records no model fingerprint (executed before they were "
                                "recorded); "
                                "re-execute it")
            elif not ref.get("fingerprint"):
                problems.append(f"{page}: reads model {model['run']} ({model['fingerprint']}), but {ref['what']} "
                                "is not known to compare with")
            elif model["fingerprint"] != ref["fingerprint"]:
                problems.append(f"{page}: reads model {model['run']} ({model['fingerprint']}), not {ref['what']}: "
                                f"{ref['run']} ({ref['fingerprint']}); re-execute it")
    return problems


def check_records(out: Path) -> list[str]:
    """Every committed record of a unit with a release that names the model it was computed from
    (a JSON file under results/<profile>/<pair>/seed<seed>/ with a "model" fingerprint: a Sec. 6
    point, a lottery ticket) names the release's."""
    from headlib.settings import results_dir
    problems = []
    for folder in sorted((out / "executed").glob("*/seed*")):
        pair, seed = folder.parent.name, int(folder.name.removeprefix("seed"))
        if (card := unit_release(out, pair, seed)) is None:
            continue
        sec3 = read_manifest(folder / f"{NOTEBOOKS[0].name}.ipynb") or {}
        loaded = card["release"]["loaded_fingerprint"]
        for path in sorted(results_dir(sec3.get("profile", "cpu"), pair, seed).rglob("*.json")):
            try:
                model = json.loads(path.read_text()).get("model")
            except (json.JSONDecodeError, AttributeError):
                continue
            if isinstance(model, str) and model != loaded:
                problems.append(f"{rel(path)}: computed from model {model}, not the release of {pair}, seed {seed} "
                                f"({card['fingerprint']}, loaded {loaded}); compute it again from the release")
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
    return problems + check_manifests(out, src_dir) + check_models(out) + check_records(out) + check_glue(out)
