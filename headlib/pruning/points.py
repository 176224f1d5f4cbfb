"""Pruning sweeps (Sec. 6), the computation: one Hard Concrete fine-tuning per lambda (or the
continuation path through the lambdas), the BLEU of the hard-masked model, and the "from scratch"
baselines trained with a pruned configuration's fixed mask. The pages' tables and verdicts on these
points are `headlib.pruning.readout`; the command line is `python -m headlib.pruning`.

Every point is one JSON file under `<results_dir>/pruning/` (written atomically), so a sweep
resumes where it stopped, several processes can share one sweep (one lambda each), and the book
reads finished points without recomputing them. A point records the device it ran on.

    full.json                           the unpruned model, evaluated like the points
    enc-self-lam0.01-s500.json          one fine-tuning (kinds, lambda, steps) and its masks
    enc-self-dsp-k12-s500.json          one exactly-k (DSP) fine-tuning
    enc-self-random-s1-k12-s500.json    one fine-tuning with a fixed mask (random-s<seed>, lrp, ...)
    enc-self-path-s100.json             a continuation path: its lambdas and a point per lambda
    scratch-<digest>.json               a from-scratch run with a fixed mask (its training results)
"""
from __future__ import annotations

import dataclasses
import json
import os
import time
from pathlib import Path
from typing import Callable

import pandas as pd
import torch

from headlib.analysis.importance import keep_top, random_mask
from headlib.config import get_config
from headlib.data.corpora import load_split, main_test_set
from headlib.files import artifacts_dir, write_json
from headlib.nn.decode import bleu_difference, evaluate_bleu, paired_bootstrap, score, translate
from headlib.nn.masks import canonical, kind_mask, parse_spec, to_spec
from headlib.nn.model import KINDS
from headlib.profiles import Grids, grids
from headlib.settings import READ_ONLY
from headlib.pruning.prune import PruneConfig, prune, prune_path, saved_path
from headlib.train import Prepared, load_model, run_dir, train
from headlib.train.records import weights

Describe = Callable[[object], dict]   # a pruned model -> fields its point records (`analysis.probe.FunctionProbe`)


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


def computing(path: Path) -> None:
    """Called before a record is computed: with READ_ONLY set, one error naming the missing (or
    outdated) record instead of minutes to hours of fine-tuning or training."""
    if os.environ.get(READ_ONLY):
        raise FileNotFoundError(f"{path}: missing or incomplete, and {READ_ONLY} is set (pages are re-executed from "
                                "committed records only): compute it first (python -m headlib.pruning)")


def described(describe: Describe | None, model) -> dict:
    """What `describe` says of `model`, with the minutes it took (a part of the study's time)."""
    if describe is None:
        return {}
    t0 = time.time()
    return describe(model) | {"describe_minutes": round((time.time() - t0) / 60, 2)}


def read_point(path: Path, fingerprint: str | None = None) -> dict | None:
    """A cached point; None if there is none or (given the model's `fingerprint`) it was computed
    from another model (a retrained baseline): the callers that compute points then recompute it,
    the ones that only read (the lottery's comparison) go without it."""
    if not path.is_file():
        return None
    row = json.loads(path.read_text())
    if fingerprint is not None and row.get("model") != fingerprint:
        print(f"{path}: computed from model {row.get('model')}, not {fingerprint}: not used", flush=True)
        return None
    return row


def evaluate_masked(model, data: Prepared, pair: str, len_alpha: float, beam: int, hypotheses: bool = False) -> dict:
    """Dev greedy and main-test greedy + beam BLEU of `model` as it is (its head masks fixed), and
    if asked its translations, dev (greedy) and test (beam), for paired bootstraps against another
    point or run; with the minutes the scoring took (a phase of the study's time)."""
    t0, test = time.time(), load_split(pair, main_test_set(pair))
    dev = translate(model, data.bpe, data.dev.src)
    test_beam = translate(model, data.bpe, test.src, beam=beam, alpha=len_alpha)
    return {"dev_greedy": score(dev, list(data.dev.tgt))["bleu"],
            "test_greedy": evaluate_bleu(model, data.bpe, test)["bleu"],
            "test_beam": score(test_beam, list(test.tgt))["bleu"],
            "test_set": test.name, "beam": beam, "len_alpha": len_alpha,
            **({"dev_hypotheses": dev, "test_hypotheses": test_beam} if hypotheses else {}),
            "score_minutes": round((time.time() - t0) / 60, 2)}


def counts(model) -> dict:
    """Retained heads per kind, in total and per layer."""
    return {"retained": {k: int(model.head_mask(k).sum()) for k in model.layer_counts()},
            "per_layer": {k: model.head_mask(k).sum(1).int().tolist() for k in model.layer_counts()},
            "mask": to_spec({k: model.head_mask(k) for k in model.layer_counts()})}


def full_point(model, data: Prepared, pair: str, len_alpha: float, beam: int, out: Path,
               describe: Describe | None = None) -> dict:
    """The unpruned model scored on this device, the reference every point is compared with (with
    what `describe` says of it, as of every point)."""
    path, fingerprint = out / "full.json", model.fingerprint()
    row = read_point(path, fingerprint)
    if row is None or "test_hypotheses" not in row or describe and "functions" not in row:
        computing(path)
        model = weights(model)
        row = {"kinds": [], "lam": None, **counts(model), "model": fingerprint,
               **evaluate_masked(model, data, pair, len_alpha, beam, hypotheses=True),
               **described(describe, model), "device": device_name()}
        write_json(path, row)
    return row


def prune_point(model, data: Prepared, cfg: PruneConfig, pair: str, len_alpha: float, beam: int,
                out: Path, progress: bool = False, hypotheses: bool = False, describe: Describe | None = None) -> dict:
    """Fine-tune with gates (at one lambda, or exactly k for DSP) or with a fixed mask, fix the
    gates to 0/1, score with the hard mask (no fine-tuning after fixing); with `hypotheses`
    the row keeps its dev (greedy) and test (beam) translations, with `describe` what it says of
    the pruned model (a stored row without them is recomputed)."""
    path, fingerprint = out / point_name(cfg), model.fingerprint()
    if (row := read_point(path, fingerprint)) is not None:
        settings = json.loads(json.dumps(dataclasses.asdict(cfg)))   # as the row records them (lists, not tuples)
        differ = [k for k, v in row.get("prune_config", {}).items() if k in settings and settings[k] != v]
        if differ:
            raise ValueError(f"{path} was computed with other settings ({', '.join(differ)}) under the same name; "
                             "remove it to recompute")
    if row is not None and (hypotheses and "test_hypotheses" not in row or describe and "functions" not in row):
        row = None
    if row is not None and cfg.method == "fixed":
        wanted = parse_spec(cfg.mask, model.layer_counts(), model.cfg.n_heads)
        if any(not torch.equal(kind_mask(row["mask"], k), m) for k, m in wanted.items()):
            raise ValueError(f"{path} holds another mask than {cfg.mask!r} under the same label; remove it to recompute")
    if row is None:
        computing(path)
        pruned, result = prune(weights(model), data, cfg, progress)
        scores = {"hard-concrete": "log_alpha", "dsp": "logits"}.get(cfg.method)
        row = {"kinds": list(cfg.kinds), "lam": cfg.lam, "method": cfg.method, "label": cfg.label or cfg.method,
               "model": fingerprint, **counts(pruned),
               **evaluate_masked(pruned, data, pair, len_alpha, beam, hypotheses),
               **described(describe, pruned),
               **({scores: {k: a.tolist() for k, a in result.scores.items()}} if scores else {}),
               "prune_minutes": result.minutes, "tokens": result.tokens, "history": result.history,
               "prune_config": dataclasses.asdict(cfg), "device": device_name()}
        write_json(path, row)
    return row


def all_heads_control(model, data: Prepared, kinds: tuple[str, ...], steps: int, seed: int, pair: str,
                      len_alpha: float, beam: int, out: Path, describe: Describe | None = None) -> dict:
    """A curve's all-heads control: the same fine-tuning as one of its points (updates, tokens,
    learning rate, what is frozen) with every head of `kinds` open and no gate. Beside the unpruned
    model it is the reference a pruned point is judged against (claim C6): it separates closing
    heads from the extra updates (out/<kinds>-all-heads-k<heads>-s<steps>.json)."""
    spec = to_spec({k: torch.ones(n, model.cfg.n_heads, dtype=torch.int) for k, n in model.layer_counts().items()
                    if k in kinds})
    cfg = PruneConfig(kinds=kinds, method="fixed", mask=spec, label="all-heads", steps=steps, seed=seed)
    return prune_point(model, data, cfg, pair, len_alpha, beam, out, hypotheses=True, describe=describe)


def path_name(cfg: PruneConfig) -> str:
    return f"{'+'.join(cfg.kinds)}-path-s{cfg.steps}.json"


def path_points(model, data: Prepared, cfg: PruneConfig, lams: list[float], pair: str, len_alpha: float,
                beam: int, out: Path, progress: bool = False, describe: Describe | None = None) -> list[dict]:
    """The continuation path (`prune.prune_path`): `cfg.steps` updates at each lambda of `lams`, in
    order, each point scored as `prune_point` scores one, with `path_updates` and `path_tokens` (the
    path's updates and target tokens up to it), its dev and test translations and what `describe`
    says of its pruned model (Fig. 8: `analysis.probe.FunctionProbe`). Written to out/`path_name`
    after every point; a finished path of the same lambdas, settings and model is read back (and
    computed again if it lacks what `describe` adds). An unfinished one resumes from its checkpoint
    under artifacts/ (`path_checkpoint`) when that is on this machine, else starts again."""
    path, fingerprint = out / path_name(cfg), model.fingerprint()
    settings = json.loads(json.dumps(dataclasses.asdict(cfg)))
    stored = read_point(path, fingerprint)
    if (stored is not None and stored["lams"] == list(lams) and stored["prune_config"] == settings
            and (describe is None or all("functions" in r for r in stored["points"]))):
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
    computing(path)
    print(f"{path}: resuming after lambda {resume['lams'][-1]:g}" if resume else f"{path}: computing", flush=True)
    for i, (lam, pruned, result) in enumerate(prune_path(weights(model), data, cfg, lams, progress, checkpoint,
                                                         resume), len(rows) + 1):
        rows.append({"kinds": list(cfg.kinds), "lam": lam, "method": "hard-concrete", "label": "path",
                     "model": fingerprint, "path_updates": i * cfg.steps, "path_tokens": result.tokens,
                     **counts(pruned),
                     **evaluate_masked(pruned, data, pair, len_alpha, beam, hypotheses=True),
                     **described(describe, pruned),
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
                    curve_lams: int | None = None, test_refs: list[str] | None = None) -> dict:
    """The continuation path against independent fine-tunings at the same lambdas (Sec. 6 at a
    fraction of the cost): per lambda the heads each retained (they agree within
    `heads_tolerance`) and a paired bootstrap on dev of the path's translations against the
    independent point's (the path agrees when its BLEU lies in the independent point's 95%
    interval). Beside it, the difference path - independent with its 95% paired bootstrap interval
    (`bleu_difference`) on dev and, given `test_refs` and kept test translations, on the test set.
    `update_ratio`: the path's updates over those of independent fine-tunings at each of its
    `curve_lams` lambdas (default: the path's lambdas)."""
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
                     "updates_independent": ind["prune_config"]["steps"], "updates_path": cheap["path_updates"],
                     **difference("dev", cheap["dev_hypotheses"], ind["dev_hypotheses"], refs)})
        if test_refs is not None and "test_hypotheses" in cheap and "test_hypotheses" in ind:
            rows[-1] |= difference("test", cheap["test_hypotheses"], ind["test_hypotheses"], test_refs)
    path_updates = max(r["path_updates"] for r in path_rows)
    independent_updates = (curve_lams or len(path_rows)) * independent[0]["prune_config"]["steps"]
    return {"points": rows, "path_updates": path_updates, "independent_updates": independent_updates,
            "update_ratio": round(path_updates / independent_updates, 4),
            "agrees": bool(rows) and all(r["heads_agree"] and r["bleu_agrees"] for r in rows)}


def difference(name: str, path: list[str], independent: list[str], refs: list[str]) -> dict:
    """BLEU(path) - BLEU(independent) on `name`'s sentences with its 95% interval, as a row's fields."""
    d = bleu_difference(path, independent, refs)
    return {f"{name}_path_minus_independent": d["difference"], f"{name}_low": d["low"], f"{name}_high": d["high"]}


def pruning_curve(model, data: Prepared, kinds: tuple[str, ...], lams: list[float], steps: int, seed: int,
                  pair: str, len_alpha: float, beam: int, out: Path, method: str = "path",
                  progress: bool = False, path_share: int = Grids.path_share,
                  describe: Describe | None = None) -> list[dict]:
    """The BLEU-vs-heads points of one pruning setting (Sec. 6), by lambda. "path": the
    continuation path, `steps // path_share` updates at each lambda (`path_points`); "independent":
    one fine-tuning of `steps` updates per lambda from the converged model (`prune_point`, the
    paper's way), each keeping its translations (the intervals against the unpruned model resample
    them). `describe` adds its fields to every point (the head functions of Fig. 8)."""
    if method == "independent":
        return [prune_point(model, data, PruneConfig(kinds=kinds, lam=lam, steps=steps, seed=seed), pair,
                            len_alpha, beam, out, progress, hypotheses=True, describe=describe) for lam in lams]
    if method != "path":
        raise ValueError(f"pruning_curve: method must be 'path' or 'independent', got {method!r}")
    return path_points(model, data, PruneConfig(kinds=kinds, steps=max(1, steps // path_share), seed=seed),
                       lams, pair, len_alpha, beam, out, progress, describe)


# Sec. 6's pruning settings and the kinds each gates: the encoder's self-attention with the decoder
# frozen (Sec. 6.2), all three kinds (Sec. 6.3). Their grids are the profile's (`headlib.profiles.Grids`).
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
                               len_alpha, beam, out, progress, hypotheses=True) for lam in lams]
    result = path_validation(rows, independent, list(data.dev.tgt), curve_lams=len(rows),
                             test_refs=list(load_split(pair, main_test_set(pair)).tgt))
    write_json(out / f"{'+'.join(kinds)}-path-validation.json", result)
    return result


def matched_budget(baseline_steps: int, row: dict) -> int:
    """Updates of a from-scratch run matched to a pruned point: the baseline's training plus the
    point's fine-tuning (its path's updates up to it, for a point of the continuation path)."""
    return baseline_steps + row.get("path_updates", row.get("prune_config", {}).get("steps", 0))


def beam_translations(final: Path, test, beam: int, alpha: float) -> list[str]:
    """The beam translations of the `test` split by a trained run's `final.pt`, with its length
    penalty `alpha` (chosen on dev): what its paired bootstraps against other models resample."""
    model, bpe, _ = load_model(final, map_location="cuda" if torch.cuda.is_available() else "cpu")
    return translate(model, bpe, test.src, beam=beam, alpha=alpha)


def scratch_config(profile: str, pair: str, seed: int, spec: str, max_steps: int):
    """The baseline's recipe with a fixed head mask and the baseline's number of updates."""
    return get_config(profile, [f"train.seed={seed}", f"model.head_mask={canonical(spec)}",
                                f"train.max_steps={max_steps}", "train.max_minutes=0"], pair=pair)


def scratch_point(profile: str, pair: str, seed: int, spec: str, max_steps: int, out: Path,
                  progress: bool = False) -> dict:
    """Train from scratch with the fixed mask `spec` (Table 2's "from scratch" column): the
    baseline's recipe (its tokens per update, its warmup and linear decay), the decay stretched
    to `max_steps`; the row keeps the run's test translations (beam) for paired bootstraps."""
    cfg = scratch_config(profile, pair, seed, spec, max_steps)
    path = out / f"scratch-{cfg.digest()}.json"
    if (row := read_point(path)) is None:
        computing(path)
        results = train(cfg, progress)
        layers = cfg.model.layer_counts()
        masks = parse_spec(spec, layers, cfg.model.n_heads)
        test = load_split(pair, main_test_set(pair))
        hyps = beam_translations(run_dir(cfg) / "final.pt", test, cfg.train.beam, results["len_alpha"])
        row = {"mask": spec, "retained": {k: int(masks[k].sum()) if k in masks else n * cfg.model.n_heads
                                         for k, n in layers.items()},
               "steps": results["steps"], "tokens": results["train_tokens"], "train_minutes": results["train_minutes"],
               "test_beam": score(hyps, list(test.tgt))["bleu"],   # the translations' own, as intervals use them
               "test_greedy": results["test"][test.name]["greedy"]["bleu"], "test_set": test.name,
               "test_hypotheses": hyps, "run_dir": results["run_dir"], "device": device_name(), "results": results}
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
    return {label: to_spec({kind: m}) for label, m in masks.items()}


