"""Pruning sweeps (Sec. 6): one Hard Concrete fine-tuning per lambda, the BLEU of the hard-masked
model, and the "from scratch" baselines trained with a pruned configuration's fixed mask.

Every point is one JSON file under `<results_dir>/pruning/` (written atomically), so a sweep
resumes where it stopped, several processes can share one sweep (one lambda each), and the book
reads finished points without recomputing them. A point records the device it ran on.

    full.json                           the unpruned model, evaluated like the points
    enc-self-lam0.01-s500.json          one fine-tuning (kinds, lambda, steps) and its masks
    enc-self-dsp-k12-s500.json          one exactly-k (DSP) fine-tuning
    enc-self-random-s1-k12-s500.json    one fine-tuning with a fixed mask (random-s<seed>, lrp, ...)
    scratch-<digest>.json               a from-scratch run with a fixed mask (its training results)
"""
from __future__ import annotations

import dataclasses
import json
import math
import time
from pathlib import Path

import pandas as pd
import torch

from headlib.analysis.importance import keep_top, random_mask
from headlib.config import Grids, get_config, grids
from headlib.data.corpora import load_split, main_test_set
from headlib.files import artifacts_dir, write_json
from headlib.nn.decode import evaluate_bleu, paired_bootstrap, score, translate
from headlib.nn.model import KINDS, mask_spec, parse_mask_spec
from headlib.pruning.prune import PruneConfig, prune, prune_path, saved_path
from headlib.train.records import run_record, weights
from headlib.train.trainer import Prepared, train


def device_name() -> str:
    return torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"


def point_name(cfg: PruneConfig) -> str:
    kinds = "+".join(cfg.kinds)
    if cfg.method == "dsp":
        tau = "" if cfg.tau == PruneConfig.tau else f"-tau{cfg.tau[0]:g}-{cfg.tau[1]:g}"
        return f"{kinds}-dsp-k{cfg.k}-lr{cfg.logit_lr:g}{tau}-s{cfg.steps}.json"
    if cfg.method == "fixed":
        return f"{kinds}-{cfg.label}-k{cfg.mask.count('1')}-s{cfg.steps}.json"
    return f"{kinds}-lam{cfg.lam:g}-s{cfg.steps}.json"


def _read(path: Path, fingerprint: str | None = None) -> dict | None:
    """A cached point; None if there is none or (given the model's `fingerprint`) it was computed
    from another model (a retrained baseline), which is then recomputed."""
    if not path.is_file():
        return None
    row = json.loads(path.read_text())
    if fingerprint is not None and row.get("model") != fingerprint:
        print(f"{path}: computed from model {row.get('model')}, not {fingerprint}: recomputing", flush=True)
        return None
    return row


def evaluate_masked(model, data: Prepared, pair: str, len_alpha: float, beam: int,
                    dev_hypotheses: bool = False) -> dict:
    """Dev greedy and main-test greedy + beam BLEU of `model` as it is (its head masks fixed), and
    if asked the dev translations (for a paired bootstrap against another point); with the
    minutes the scoring took (a phase of the study's time)."""
    t0, test = time.time(), load_split(pair, main_test_set(pair))
    dev = translate(model, data.bpe, data.dev.src)
    return {"dev_greedy": score(dev, list(data.dev.tgt))["bleu"],
            "test_greedy": evaluate_bleu(model, data.bpe, test)["bleu"],
            "test_beam": evaluate_bleu(model, data.bpe, test, beam, len_alpha)["bleu"],
            "test_set": test.name, "beam": beam, "len_alpha": len_alpha,
            **({"dev_hypotheses": dev} if dev_hypotheses else {}), "score_minutes": round((time.time() - t0) / 60, 2)}


def counts(model) -> dict:
    """Retained heads per kind, in total and per layer."""
    return {"retained": {k: int(model.head_mask(k).sum()) for k in model.layer_counts()},
            "per_layer": {k: model.head_mask(k).sum(1).int().tolist() for k in model.layer_counts()},
            "mask": mask_spec({k: model.head_mask(k) for k in model.layer_counts()})}


def full_point(model, data: Prepared, pair: str, len_alpha: float, beam: int, out: Path) -> dict:
    """The unpruned model scored on this device, the reference every point is compared with."""
    path, fingerprint = out / "full.json", model.fingerprint()
    if (row := _read(path, fingerprint)) is None:
        model = weights(model)
        row = {"kinds": [], "lam": None, **counts(model), "model": fingerprint,
               **evaluate_masked(model, data, pair, len_alpha, beam), "device": device_name()}
        write_json(path, row)
    return row


def prune_point(model, data: Prepared, cfg: PruneConfig, pair: str, len_alpha: float, beam: int,
                out: Path, progress: bool = False, dev_hypotheses: bool = False) -> dict:
    """Fine-tune with gates (at one lambda, or exactly k for DSP) or with a fixed mask, fix the
    gates to 0/1, score with the hard mask (no fine-tuning after fixing); with `dev_hypotheses`
    the row keeps the dev translations (a stored row without them is recomputed)."""
    path, fingerprint = out / point_name(cfg), model.fingerprint()
    if (row := _read(path, fingerprint)) is not None:
        settings = json.loads(json.dumps(dataclasses.asdict(cfg)))   # as the row records them (lists, not tuples)
        differ = [k for k, v in row.get("prune_config", {}).items() if k in settings and settings[k] != v]
        if differ:
            raise ValueError(f"{path} was computed with other settings ({', '.join(differ)}) under the same name; "
                             "remove it to recompute")
    if row is not None and dev_hypotheses and "dev_hypotheses" not in row:
        row = None
    if row is not None and cfg.method == "fixed":
        wanted = parse_mask_spec(cfg.mask, model.layer_counts(), model.cfg.n_heads)
        if any(not torch.equal(kind_mask(row, k), m) for k, m in wanted.items()):
            raise ValueError(f"{path} holds another mask than {cfg.mask!r} under the same label; remove it to recompute")
    if row is None:
        pruned, result = prune(weights(model), data, cfg, progress)
        scores = {"hard-concrete": "log_alpha", "dsp": "logits"}.get(cfg.method)
        row = {"kinds": list(cfg.kinds), "lam": cfg.lam, "method": cfg.method, "label": cfg.label or cfg.method,
               "model": fingerprint, **counts(pruned),
               **evaluate_masked(pruned, data, pair, len_alpha, beam, dev_hypotheses),
               **({scores: {k: a.tolist() for k, a in result.scores.items()}} if scores else {}),
               "prune_minutes": result.minutes, "history": result.history,
               "prune_config": dataclasses.asdict(cfg), "device": device_name()}
        write_json(path, row)
    return row


def path_name(cfg: PruneConfig) -> str:
    return f"{'+'.join(cfg.kinds)}-path-s{cfg.steps}.json"


def path_points(model, data: Prepared, cfg: PruneConfig, lams: list[float], pair: str, len_alpha: float,
                beam: int, out: Path, progress: bool = False) -> list[dict]:
    """The continuation path (`prune.prune_path`): `cfg.steps` updates at each lambda of `lams`, in
    order, each point scored as `prune_point` scores one, with `path_updates` (the path's updates
    up to it) and its dev translations. Written to out/`path_name` after every point; a finished
    path of the same lambdas, settings and model is read back. An unfinished one resumes from its
    checkpoint under artifacts/ (`path_checkpoint`) when that is on this machine, else starts again."""
    path, fingerprint = out / path_name(cfg), model.fingerprint()
    settings = json.loads(json.dumps(dataclasses.asdict(cfg)))
    stored = _read(path, fingerprint)
    if stored is not None and stored["lams"] == list(lams) and stored["prune_config"] == settings:
        if stored["finished"]:
            return stored["points"]
    else:
        stored = None
    checkpoint = path_checkpoint(fingerprint, cfg)
    resume = saved_path(checkpoint, fingerprint, cfg, lams)
    rows = stored["points"][:len(resume["lams"])] if stored and resume else []
    if resume and len(rows) < len(resume["lams"]):   # a checkpoint without its points: start again
        checkpoint.unlink()
        resume = None
    print(f"{path}: resuming after lambda {resume['lams'][-1]:g}" if resume else f"{path}: computing", flush=True)
    for i, (lam, pruned, result) in enumerate(prune_path(weights(model), data, cfg, lams, progress, checkpoint,
                                                         resume), len(rows) + 1):
        rows.append({"kinds": list(cfg.kinds), "lam": lam, "method": "hard-concrete", "label": "path",
                     "model": fingerprint, "path_updates": i * cfg.steps, **counts(pruned),
                     **evaluate_masked(pruned, data, pair, len_alpha, beam, dev_hypotheses=True),
                     "log_alpha": {k: a.tolist() for k, a in result.scores.items()},
                     "prune_minutes": result.minutes, "device": device_name()})
        write_json(path, {"lams": list(lams), "model": fingerprint, "prune_config": settings,
                          "finished": i == len(lams), "points": rows})
    checkpoint.unlink(missing_ok=True)
    return rows


def path_checkpoint(fingerprint: str, cfg: PruneConfig) -> Path:
    """Where an unfinished path of model `fingerprint` keeps its fine-tuning state (not committed)."""
    return artifacts_dir() / "pruning" / fingerprint / path_name(cfg).replace(".json", ".pt")


def path_validation(path_rows: list[dict], independent: list[dict], refs: list[str], heads_tolerance: int = 2,
                    curve_lams: int | None = None) -> dict:
    """The continuation path against independent fine-tunings at the same lambdas (Sec. 6 at a
    fraction of the cost): per lambda the heads each retained (they agree within
    `heads_tolerance`) and a paired bootstrap on dev of the path's translations against the
    independent point's (the path agrees when its BLEU lies in the independent point's 95%
    interval). `update_ratio`: the path's updates over those of independent fine-tunings at each
    of its `curve_lams` lambdas (default: the path's lambdas)."""
    by_lam = {r["lam"]: r for r in path_rows}
    rows = []
    for ind in sorted(independent, key=lambda r: r["lam"]):
        if ind["lam"] not in by_lam:
            raise ValueError(f"path_validation: lambda {ind['lam']} is not on the path ({sorted(by_lam)})")
        cheap = by_lam[ind["lam"]]
        heads, heads_path = (sum(r["retained"][k] for k in r["kinds"]) for r in (ind, cheap))
        boot = paired_bootstrap(ind["dev_hypotheses"], cheap["dev_hypotheses"], refs)
        rows.append({"lam": ind["lam"], "heads_independent": heads, "heads_path": heads_path,
                     "heads_agree": abs(heads - heads_path) <= heads_tolerance,
                     "dev_independent": boot["baseline_bleu"], "dev_independent_ci": boot["baseline_ci"],
                     "dev_path": boot["system_bleu"], "p_value": boot["p_value"], "bleu_agrees": boot["within"],
                     "test_beam_independent": ind["test_beam"], "test_beam_path": cheap["test_beam"],
                     "updates_independent": ind["prune_config"]["steps"], "updates_path": cheap["path_updates"]})
    path_updates = max(r["path_updates"] for r in path_rows)
    independent_updates = (curve_lams or len(path_rows)) * independent[0]["prune_config"]["steps"]
    return {"points": rows, "path_updates": path_updates, "independent_updates": independent_updates,
            "update_ratio": round(path_updates / independent_updates, 4),
            "agrees": bool(rows) and all(r["heads_agree"] and r["bleu_agrees"] for r in rows)}


def pruning_curve(model, data: Prepared, kinds: tuple[str, ...], lams: list[float], steps: int, seed: int,
                  pair: str, len_alpha: float, beam: int, out: Path, method: str = "path",
                  progress: bool = False, path_share: int = Grids.path_share) -> list[dict]:
    """The BLEU-vs-heads points of one pruning setting (Sec. 6), by lambda. "path": the
    continuation path, `steps // path_share` updates at each lambda (`path_points`); "independent":
    one fine-tuning of `steps` updates per lambda from the converged model (`prune_point`, the
    paper's way)."""
    if method == "independent":
        return [prune_point(model, data, PruneConfig(kinds=kinds, lam=lam, steps=steps, seed=seed), pair,
                            len_alpha, beam, out, progress) for lam in lams]
    if method != "path":
        raise ValueError(f"pruning_curve: method must be 'path' or 'independent', got {method!r}")
    return path_points(model, data, PruneConfig(kinds=kinds, steps=max(1, steps // path_share), seed=seed),
                       lams, pair, len_alpha, beam, out, progress)


# Sec. 6's pruning settings and the kinds each gates: the encoder's self-attention with the decoder
# frozen (Sec. 6.2), all three kinds (Sec. 6.3). Their grids are the profile's (`headlib.config.Grids`).
SETTINGS = {"encoder": ("enc-self",), "all": KINDS}


def lambda_grid(profile: str, setting: str) -> list[float]:
    return list(grids(profile).lambdas(setting))


def independent_steps(profile: str) -> int:
    """Updates of one independent fine-tuning (the path spends a `Grids.path_share`th of it per lambda)."""
    return grids(profile).finetune_steps


def scratch_head_counts(profile: str, setting: str) -> list[int]:
    return list(grids(profile).scratch_heads(setting))


def scratch_plan(rows: list[dict], heads: list[int], baseline_steps: int, setting: str) -> list[tuple[str, int]]:
    """The from-scratch runs a pruning page compares with (Table 2's "from scratch"): per head count
    the nearest pruned point's mask (its encoder part alone for the encoder setting) with the
    updates that point got in all (`matched_budget`), then the all-heads control at the first's."""
    picked = [nearest(rows, n) for n in heads]
    plan = [(r["mask"].split(",")[0] if setting == "encoder" else r["mask"], matched_budget(baseline_steps, r))
            for r in picked]
    return plan + [("", plan[0][1])]


def validation_lambdas(lams: list[float], n: int = Grids.validation_points) -> list[float]:
    """`n` lambdas of the grid, evenly spaced inside it, fixed before any point is computed."""
    return list(dict.fromkeys(lams[round((i + 1) * (len(lams) - 1) / (n + 1))] for i in range(n)))


def validate_curve(model, data: Prepared, rows: list[dict], lams: list[float], steps: int, seed: int,
                   pair: str, len_alpha: float, beam: int, out: Path, progress: bool = False) -> dict:
    """The path's points at `lams` against independent fine-tunings of `steps` updates there
    (`path_validation`), written to out/<kinds>-path-validation.json."""
    kinds = tuple(rows[0]["kinds"])
    independent = [prune_point(model, data, PruneConfig(kinds=kinds, lam=lam, steps=steps, seed=seed), pair,
                               len_alpha, beam, out, progress, dev_hypotheses=True) for lam in lams]
    result = path_validation(rows, independent, list(data.dev.tgt), curve_lams=len(rows))
    write_json(out / f"{'+'.join(kinds)}-path-validation.json", result)
    return result


def dev_choice(runs: list[tuple[int, float, dict]]) -> dict:
    """The setting dev prefers among points that differ in one setting (e.g. DSP's logit learning
    rate): `runs` is [(head count, setting, point)]; per head count, the setting whose point has the
    higher dev BLEU (greedy); returned: the wins of each setting and the one with most wins."""
    by_k: dict[int, list[tuple[float, float]]] = {}
    for k, setting, row in runs:
        by_k.setdefault(k, []).append((row["dev_greedy"], setting))
    wins: dict[float, int] = {setting: 0 for _, setting, _ in runs}
    for scored in by_k.values():
        wins[max(scored)[1]] += 1
    return {"wins": wins, "chosen": max(wins, key=wins.get), "head_counts": len(by_k)}


def dev_choice_note(choice: dict, used, what: str, show=lambda s: f"{s:g}") -> str:
    """One sentence (Markdown) on what dev chose (`dev_choice`) against the setting `used` on the
    page, `what` naming it (e.g. "the logits' learning rate"), each setting written by `show`."""
    chosen = choice["chosen"]
    said = (f"On dev (greedy BLEU), {what} {show(chosen)} scores higher at {choice['wins'][chosen]} of "
            f"{choice['head_counts']} head counts")
    if chosen == used:
        return said + ", so dev agrees with the setting used above."
    return (said + f": dev would choose {show(chosen)}, not the {show(used)} used above, which was chosen before "
            "this protocol, with test scores in view.")


def matched_budget(baseline_steps: int, row: dict) -> int:
    """Updates of a from-scratch run matched to a pruned point: the baseline's training plus the
    point's fine-tuning (its path's updates up to it, for a point of the continuation path)."""
    return baseline_steps + row.get("path_updates", row.get("prune_config", {}).get("steps", 0))


def canonical_spec(spec: str) -> str:
    """`spec` without the kinds whose heads are all on (the same model, so the same run)."""
    return ",".join(part for part in spec.split(",") if "0" in part.partition(":")[2])


def scratch_config(profile: str, pair: str, seed: int, spec: str, max_steps: int):
    """The baseline's recipe with a fixed head mask and the baseline's number of updates."""
    return get_config(profile, [f"train.seed={seed}", f"model.head_mask={canonical_spec(spec)}",
                                f"train.max_steps={max_steps}", "train.max_minutes=0"], pair=pair)


def scratch_point(profile: str, pair: str, seed: int, spec: str, max_steps: int, out: Path,
                  progress: bool = False) -> dict:
    """Train from scratch with the fixed mask `spec` (Table 2's "from scratch" column): the
    baseline's recipe, its decay stretched to `max_steps`."""
    cfg = scratch_config(profile, pair, seed, spec, max_steps)
    path = out / f"scratch-{cfg.digest()}.json"
    if (row := _read(path)) is None:
        results = train(cfg, progress)
        layers = cfg.model.layer_counts()
        masks = parse_mask_spec(spec, layers, cfg.model.n_heads)
        test = main_test_set(pair)
        row = {"mask": spec, "retained": {k: int(masks[k].sum()) if k in masks else n * cfg.model.n_heads
                                         for k, n in layers.items()},
               "steps": results["steps"], "train_minutes": results["train_minutes"],
               "test_beam": results["test"][test]["beam"]["bleu"],
               "test_greedy": results["test"][test]["greedy"]["bleu"], "test_set": test,
               "run_dir": results["run_dir"], "device": device_name(), "results": results}
        write_json(path, row)
    return row


def scratch_rows(out: Path) -> list[dict]:
    """The finished from-scratch runs of a sweep."""
    return [json.loads(p.read_text()) for p in sorted(out.glob("scratch-*.json"))]


def points(out: Path, kinds: tuple[str, ...], model=None) -> list[dict]:
    """The finished Hard Concrete points of one kind set (computed from `model`, if given), by
    lambda: the continuation path's where one is finished (`path_points`; the curve that Sec. 6
    shows), else the independent fine-tunings'."""
    fp, name = (model.fingerprint() if model is not None else None), "+".join(kinds)
    paths = [json.loads(p.read_text()) for p in sorted(out.glob(f"{name}-path-s*.json"))]
    paths = [s for s in paths if s.get("finished") and (fp is None or s.get("model") == fp)]
    rows = paths[-1]["points"] if paths else [json.loads(p.read_text()) for p in out.glob(f"{name}-lam*.json")]
    rows = [r for r in rows if fp is None or r.get("model") == fp]
    return sorted(rows, key=lambda r: r["lam"])


def nearest(rows: list[dict], total: int) -> dict:
    """The point whose total retained heads (over its gated kinds) is closest to `total`."""
    return min(rows, key=lambda r: (abs(sum(r["retained"][k] for k in r["kinds"]) - total), r["lam"]))


# measures in importance_measures.csv that choose the heads of a fixed-mask point
ORDER_COLUMNS = {"confidence": "confidence", "lrp": "LRP", "michel": "gradient (Michel)"}


def fixed_masks(measures: pd.DataFrame, k: int, random_seeds=(1, 2, 3), kind: str = "enc-self") -> dict[str, str]:
    """The fixed-mask points at `k` heads, as head-mask specs by label: k heads chosen uniformly
    per seed (`random-s<seed>`, Budhraja et al. 2020), and the k top heads of each importance
    measure over all layers (`measures`: one row per layer/head with the ORDER_COLUMNS)."""
    grids = {label: torch.tensor(measures.pivot(index="layer", columns="head", values=col).values)
             for label, col in ORDER_COLUMNS.items()}
    shape = tuple(next(iter(grids.values())).shape)
    masks = {f"random-s{s}": random_mask(shape, k, s) for s in random_seeds}
    masks |= {label: keep_top(grid, k) for label, grid in grids.items()}
    return {label: mask_spec({kind: m}) for label, m in masks.items()}


# -- reading a sweep ---------------------------------------------------------------------------

def sweep_table(rows: list[dict], full: dict, tuned: dict | None = None) -> pd.DataFrame:
    """One row per point: lambda, heads per kind, BLEU, and the change against the unpruned model
    (`full`) and against `tuned`, the point fine-tuned with the smallest lambda (same updates,
    no head closed), which separates the effect of pruning from that of the extra updates."""
    table = pd.DataFrame([{"lambda": r["lam"], **{f"{k} heads": r["retained"][k] for k in r["kinds"]},
                           "BLEU": r["test_beam"], "BLEU greedy": r["test_greedy"]} for r in rows])
    table["vs. full"] = table["BLEU"] - full["test_beam"]
    if tuned is not None:
        table["vs. fine-tuned 48"] = table["BLEU"] - tuned["test_beam"]
    return table


def pruned_vs_scratch(rows: list[dict], scratch: list[dict]) -> pd.DataFrame:
    """Each pruned point beside the from-scratch run trained with its head mask (Table 2's question):
    one row per point of `rows`, in order, with "mask" (the point's `canonical_spec`), "lambda",
    "pruned" (its test BLEU, beam), "from scratch" (the run's; NaN where no run of `scratch` has the
    point's mask), "pruned - scratch" and "scratch device" (missing where no run). Masks compare as
    `canonical_spec`s (kinds with every head open left out), so a run trained with an encoder-only
    spec matches a point that closed encoder heads only; runs with one spec are one run."""
    by_spec = {canonical_spec(s["mask"]): s for s in scratch}
    table = []
    for r in rows:
        spec = canonical_spec(r["mask"])
        s = by_spec.get(spec)
        table.append({"mask": spec, "lambda": r["lam"], "pruned": r["test_beam"],
                      "from scratch": s["test_beam"] if s is not None else None,
                      "scratch device": s["device"] if s is not None else None})
    table = pd.DataFrame(table, columns=["mask", "lambda", "pruned", "from scratch", "scratch device"])
    table["from scratch"] = table["from scratch"].astype(float)                 # None -> NaN
    table.insert(4, "pruned - scratch", table["pruned"] - table["from scratch"])
    return table                                                                 # (len(rows), 6)


def scratch_table(rows: list[dict], scratch: list[dict], kind: str = "enc-self") -> pd.DataFrame:
    """The encoder page's pruned-vs-scratch table: one row per from-scratch run of `scratch`, in
    order, beside the first point of `rows` with its mask (compared as in `pruned_vs_scratch`):
    "encoder heads" (the run's heads of `kind`), "lambda", "pruned", "from scratch", "pruned -
    scratch" and "scratch device". A run that no point has the mask of is an error."""
    table = []
    for s in scratch:
        spec = canonical_spec(s["mask"])
        point = next((r for r in rows if canonical_spec(r["mask"]) == spec), None)
        if point is None:
            raise ValueError(f"no pruned point has the mask {spec!r} of a from-scratch run")
        table.append({"encoder heads": s["retained"][kind], "lambda": point["lam"], "pruned": point["test_beam"],
                      "from scratch": s["test_beam"], "pruned - scratch": point["test_beam"] - s["test_beam"],
                      "scratch device": s["device"]})
    return pd.DataFrame(table, columns=["encoder heads", "lambda", "pruned", "from scratch", "pruned - scratch",
                                        "scratch device"])                       # (len(scratch), 6)


def method_gaps(methods: pd.DataFrame) -> pd.DataFrame:
    """Per head count k of a method comparison (rows: k, method, BLEU; several rows for the random
    draws): the best fine-tuned method and its mean BLEU, the spread between the best and worst
    fine-tuned method means, and how far the random draws' mean falls behind the best method.
    Training from scratch is a different budget and is left out."""
    means = (methods[methods["method"] != "from scratch"]
             .groupby(["k", "method"])["BLEU"].mean().reset_index())
    rows = []
    for k, at in means.groupby("k"):
        at = at.set_index("method")["BLEU"]
        rows.append({"k": int(k), "best": at.idxmax(), "best BLEU": float(at.max()),
                     "spread": float(at.max() - at.min()),
                     "random gap": float(at.max() - at["random"]) if "random" in at else float("nan")})
    return pd.DataFrame(rows)


# The fine-tuned methods of the Beyond page: fixed-mask labels (`fixed_masks`, less a random draw's
# "-s<seed>") as the page names them, and the order its figure and table show the methods in.
METHOD_NAMES = {"lrp": "LRP", "confidence": "confidence", "michel": "gradient (Michel)"}
METHOD_ORDER = ("Hard Concrete", "DSP", "random", "LRP", "confidence", "gradient (Michel)", "from scratch")


def method_comparison(ks, hard_concrete: list[dict], dsp: dict[int, dict], fine_tune, measures: pd.DataFrame,
                      labels, random_seeds, scratch: list[dict], heads_per_kind: int) -> pd.DataFrame:
    """The fine-tuned methods at each encoder head count k of `ks` (same budget), one row per point:
    k, method, BLEU (test, beam) and the device it ran on. At each k, in this order: the first
    Hard Concrete point of `hard_concrete` (by lambda) that kept exactly k encoder heads, if any;
    DSP's point `dsp[k]`; the fixed masks of `fixed_masks(measures, k, random_seeds)` whose label
    (a random draw's without "-s<seed>") is in `labels`, fine-tuned by `fine_tune(method="fixed",
    mask=spec, label=label)` (a cached point: `prune_point`); and the from-scratch runs of `scratch`
    with k encoder heads and all `heads_per_kind` heads of both decoder kinds. Methods are named as
    the page names them (`METHOD_NAMES`; every random draw is "random")."""
    rows = []
    for k in ks:
        hc = [r for r in hard_concrete if r["retained"]["enc-self"] == k]
        picked = [("Hard Concrete", hc[0])] if hc else []
        picked += [("DSP", dsp[k])]
        picked += [(label, fine_tune(method="fixed", mask=spec, label=label))
                   for label, spec in fixed_masks(measures, k, random_seeds).items() if label.split("-s")[0] in labels]
        picked += [("from scratch", r) for r in scratch if r["retained"]["enc-self"] == k
                   and r["retained"]["dec-self"] == r["retained"]["dec-enc"] == heads_per_kind]
        rows += [{"k": k, "method": m, "BLEU": r["test_beam"], "device": r["device"]} for m, r in picked]
    names = lambda m: "random" if m.startswith("random") else METHOD_NAMES.get(m, m)
    return pd.DataFrame(rows, columns=["k", "method", "BLEU", "device"]).assign(      # (points, 4)
        method=lambda d: d["method"].map(names))


def method_table(methods: pd.DataFrame) -> pd.DataFrame:
    """A `method_comparison` as text, methods (rows, in `METHOD_ORDER`) x head counts (columns
    "<k> heads"): the mean BLEU, and for several points (the random draws) "mean ± std (n=count)";
    empty where a method has no point at k."""
    summary = methods.groupby(["method", "k"])["BLEU"].agg(["mean", "std", "count"]).reset_index()
    summary["cell"] = summary.apply(lambda r: f"{r['mean']:.2f}" + (f" ± {r['std']:.2f} (n={int(r['count'])})"
                                                                    if r["count"] > 1 else ""), axis=1)
    table = summary.pivot(index="method", columns="k", values="cell").reindex(
        [m for m in METHOD_ORDER if m in set(summary["method"])])
    table.columns = [f"{k} heads" for k in table.columns]
    return table.fillna("")                                                      # (methods, head counts)


def mean_open_layer(rows: list[dict], kind: str, per_kind: int) -> float:
    """The mean layer (1-based) of the heads of `kind` left open, over the sweep points that closed
    some but not all of its `per_kind` heads (Fig. 10: do a kind's survivors sit in low or high
    layers?); NaN when no point did."""
    total = weighted = 0
    for r in rows:
        if 0 < r["retained"][kind] < per_kind:
            total += sum(r["per_layer"][kind])
            weighted += sum((i + 1) * n for i, n in enumerate(r["per_layer"][kind]))
    return weighted / total if total else float("nan")


def choice_of_heads_verdict(methods: pd.DataFrame, spread: float | None) -> str:
    """Whether the choice of heads matters once the model is fine-tuned (Budhraja et al. 2020):
    at a head count k it does if the best method beats every random draw and the draws' mean by
    more than `spread` (the seed spread of BLEU: a smaller gap, measured on one seed, is what another
    seed could give; None: not measured, so beyond zero). Training from scratch is left out."""
    gaps = method_gaps(methods).set_index("k")
    random = methods[methods["method"] == "random"].groupby("k")["BLEU"]
    margin = spread or 0.0
    matters = [int(k) for k, g in gaps.iterrows()
               if k in random.groups and g["best BLEU"] > random.get_group(k).max() and g["random gap"] > margin]
    against = f"the seed spread of {spread:.2f} BLEU" if spread is not None else "zero (no seed spread measured)"
    if not matters:
        return (f"at no head count does the best method beat every random draw by more than {against}: knowing "
                "which heads matter buys little once the model is fine-tuned, as Budhraja et al. found.")
    return (f"the choice of heads matters beyond the fine-tuning budget at {', '.join(map(str, matters))} heads "
            f"(the best method above every random draw, and the draws' mean more than {against} behind).")


def kind_mask(row: dict, kind: str) -> torch.Tensor:
    """The 0/1 (layers, heads) mask of one kind in a point (or scratch run) row."""
    part = next(p for p in row["mask"].split(",") if p.startswith(kind + ":"))
    rows = part.split(":")[1].split("/")
    return parse_mask_spec(part, {kind: len(rows)}, len(rows[0]))[kind]


def survival(rows: list[dict], kind: str = "enc-self") -> pd.DataFrame:
    """Per head: the largest lambda at which it is still open (0 if closed at every lambda),
    i.e. how hard the head is to prune."""
    last = torch.zeros_like(kind_mask(rows[0], kind), dtype=torch.float64)
    for r in sorted(rows, key=lambda r: r["lam"]):
        last = torch.where(kind_mask(r, kind).bool(), torch.full_like(last, r["lam"]), last)
    return pd.DataFrame([{"layer": i + 1, "head": j + 1, "survives_to_lambda": float(last[i, j])}
                         for i in range(last.shape[0]) for j in range(last.shape[1])])


def pruning_order(table: pd.DataFrame) -> list[tuple[str, float]]:
    """Attention kinds of an all-kinds sweep table (a "<kind> heads" column per kind, "lambda"),
    ordered by the smallest lambda at which at most half of the kind's heads are open (the
    kind's heads at the smallest lambda count as all of them)."""
    kinds = [c.removesuffix(" heads") for c in table.columns if c.endswith(" heads") and c != "total heads"]
    table = table.sort_values("lambda")
    def half_life(kind):
        col = table[f"{kind} heads"]
        below = table.loc[col <= col.iloc[0] / 2, "lambda"]
        return float(below.min()) if len(below) else float("inf")
    return sorted(((k, half_life(k)) for k in kinds), key=lambda t: (t[1], kinds.index(t[0])))


def encoder_first_cross_last(order: list[tuple[str, float]]) -> bool:
    """The paper's Fig. 9 claim on a `pruning_order`: enc-self loses half its heads at a finite
    lambda, before dec-enc, with dec-self in between (ties allowed)."""
    lam = dict(order)
    return (math.isfinite(lam["enc-self"]) and lam["enc-self"] < lam["dec-enc"]
            and lam["enc-self"] <= lam["dec-self"] <= lam["dec-enc"])


def enrichment(rows: list[dict], heads: pd.DataFrame, kind: str = "enc-self") -> pd.DataFrame:
    """Per point, are the retained heads the specialized / important ones?

    `heads` has one row per (layer, head) with a boolean `specialized` and a `relevance`. Fisher's
    exact test (one-sided: retained heads are more often specialized) and the Mann-Whitney U test
    (one-sided: retained heads have higher relevance)."""
    from scipy.stats import fisher_exact, mannwhitneyu
    out = []
    for r in rows:
        grid = kind_mask(r, kind)
        kept = heads.apply(lambda h: bool(grid[h["layer"] - 1, h["head"] - 1]), axis=1)
        n_kept = int(kept.sum())
        if n_kept in (0, len(heads)):
            continue
        spec = heads["specialized"].astype(bool)
        table = [[int((kept & spec).sum()), int((kept & ~spec).sum())],
                 [int((~kept & spec).sum()), int((~kept & ~spec).sum())]]
        out.append({"lambda": r["lam"], "retained": n_kept, "specialized retained": table[0][0],
                    "specialized pruned": table[1][0],
                    "Fisher p": fisher_exact(table, alternative="greater").pvalue,
                    "relevance retained": heads.loc[kept, "relevance"].mean(),
                    "relevance pruned": heads.loc[~kept, "relevance"].mean(),
                    "Mann-Whitney p": mannwhitneyu(heads.loc[kept, "relevance"], heads.loc[~kept, "relevance"],
                                                   alternative="greater").pvalue})
    return pd.DataFrame(out, columns=["lambda", "retained", "specialized retained", "specialized pruned", "Fisher p",
                                      "relevance retained", "relevance pruned", "Mann-Whitney p"])


def main(argv=None) -> None:
    """`python -m headlib.pruning.sweep prune|scratch ...`: one process's share of a sweep (the book's
    notebooks run the same functions; this entry point lets several processes share a GPU)."""
    import argparse

    from headlib.settings import results_dir
    from headlib.train.records import RecordedModel, recorded_model
    from headlib.train.trainer import prepare_data, run_dir
    p = argparse.ArgumentParser(prog="python -m headlib.pruning.sweep")
    p.add_argument("what", choices=["curve", "scratches", "prune", "dsp", "fixed", "scratch", "pick"],
                   help="curve: a setting's continuation path and its validation, as its page computes them; "
                        "scratches: that page's from-scratch runs, planned from the finished curve")
    p.add_argument("--setting", default="encoder", choices=list(SETTINGS), help="curve, scratches")
    p.add_argument("--no-validate", action="store_true", help="curve: the path alone")
    p.add_argument("--profile", default="cpu")
    p.add_argument("--pair", default="en-de")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--kinds", default="enc-self", help="comma-separated attention kinds to gate")
    p.add_argument("--lams", default="0.01", help="comma-separated lambdas (prune)")
    p.add_argument("--steps", type=int, default=PruneConfig.steps, help="fine-tuning updates (prune)")
    p.add_argument("--k", default="12", help="comma-separated head counts (dsp, fixed)")
    p.add_argument("--labels", default="random-s1,random-s2,random-s3,michel,confidence,lrp",
                   help="fixed: which masks (random-s<seed> or an importance measure)")
    p.add_argument("--spec", default="", help="fixed head mask (scratch), as model.head_mask")
    p.add_argument("--totals", default="17,10", help="pick: print the masks of the points nearest these head counts")
    p.add_argument("--full", action="store_true", help="also score the unpruned model (full.json)")
    p.add_argument("--max-steps", type=int, default=0, help="updates of a scratch run (default: the baseline's)")
    a = p.parse_args(argv)
    out = results_dir(a.profile, a.pair, a.seed) / "pruning"
    if a.what == "pick":
        rows = points(out, tuple(a.kinds.split(",")))
        print("\n".join(dict.fromkeys(nearest(rows, int(n))["mask"] for n in a.totals.split(","))) if rows else "")
        return
    if a.what == "scratches":   # needs the committed curve and the baseline's record, not its weights
        cfg = get_config(a.profile, [f"train.seed={a.seed}"], pair=a.pair)
        base = run_record(cfg)
        rows = points(out, SETTINGS[a.setting], RecordedModel(base, run_dir(cfg) / "final.pt")) if base else []
        if not rows:
            raise SystemExit(f"scratches: no trained baseline record or no finished {a.setting} curve under {out}")
        for spec, steps in scratch_plan(rows, scratch_head_counts(a.profile, a.setting), base["steps"], a.setting):
            row = scratch_point(a.profile, a.pair, a.seed, spec, steps, out, progress=True)
            print(json.dumps({k: row[k] for k in ("retained", "test_beam", "steps", "device")}), flush=True)
        return
    if a.what == "scratch":   # needs the baseline itself only when its number of updates is not given
        steps = a.max_steps or recorded_model(a.profile, a.pair, a.seed)[1]["steps"]
        row = scratch_point(a.profile, a.pair, a.seed, a.spec, steps, out, progress=True)
        print(json.dumps({k: row[k] for k in ("retained", "test_beam", "steps", "device")}))
        return
    model, base = recorded_model(a.profile, a.pair, a.seed)
    if torch.cuda.is_available():
        model = weights(model).cuda()
    data = prepare_data(get_config(a.profile, [f"train.seed={a.seed}"], pair=a.pair))
    beam = base["config"]["train"]["beam"]
    if a.full:
        full_point(model, data, a.pair, base["len_alpha"], beam, out)
    if a.what == "curve":
        lams, steps = lambda_grid(a.profile, a.setting), independent_steps(a.profile)
        full_point(model, data, a.pair, base["len_alpha"], beam, out)
        rows = pruning_curve(model, data, SETTINGS[a.setting], lams, steps, a.seed, a.pair, base["len_alpha"],
                             beam, out, progress=True)
        if not a.no_validate:
            checked = validate_curve(model, data, rows, validation_lambdas(lams), steps, a.seed, a.pair,
                                     base["len_alpha"], beam, out, progress=True)
            print(json.dumps({k: checked[k] for k in ("update_ratio", "agrees")}))
        return
    kinds, ks = tuple(a.kinds.split(",")), [int(k) for k in a.k.split(",")]
    if a.what == "dsp":
        cfgs = [PruneConfig(kinds=kinds, method="dsp", k=k, steps=a.steps, seed=a.seed) for k in ks]
    elif a.what == "fixed":
        measures = pd.read_csv(out.parent / "importance_measures.csv")
        cfgs = [PruneConfig(kinds=kinds, method="fixed", mask=spec, label=label, steps=a.steps, seed=a.seed)
                for k in ks for label, spec in fixed_masks(measures, k).items() if label in a.labels.split(",")]
    else:
        cfgs = [PruneConfig(kinds=kinds, lam=lam, steps=a.steps, seed=a.seed) for lam in map(float, a.lams.split(","))]
    for cfg in cfgs:
        row = prune_point(model, data, cfg, a.pair, base["len_alpha"], beam, out)
        print(json.dumps({k: row.get(k) for k in ("label", "lam", "retained", "test_beam", "prune_minutes", "device")}), flush=True)


if __name__ == "__main__":
    main()
