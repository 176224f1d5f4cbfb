"""Training records: what is known of a trained run without training it.

A run writes `results.json` into its run directory (`headlib.train.trainer`); the study commits a
copy as `results/<profile>/<pair>/seed<seed>/training_results.json`. This module reads them:

    committed_record(cfg), run_record(cfg)   the record of a config's run (here, else committed)
    record_digest(record), model_id(record)  what a run learned, and which model it is (fingerprint)
    RecordedModel, recorded_model, weights   a model known from its record, weights loaded on demand
    seeds_in, seeds_with, training_table     the seeds of a (profile, pair) with a record, as a table

Training itself never reads these: it takes its config and writes its own run directory.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd

from headlib.config import Config, ModelConfig, get_config
from headlib.data.corpora import main_test_set
from headlib.nn.model import Transformer
from headlib.settings import results_dir
from headlib.train import release
from headlib.train.runs import load_model, run_dir
from headlib.train.trainer import trained_model


def seeds_in(pair_dir: Path, name: str) -> list[int]:
    """The seeds under `pair_dir` (results/<profile>/<pair>) whose directory holds `name`."""
    return sorted(int(p.parent.name[len("seed"):]) for p in pair_dir.glob(f"seed*/{name}"))


def seeds_with(profile: str, pair: str, name: str) -> list[int]:
    """The seeds of (profile, pair) whose result directory holds `name`."""
    return seeds_in(results_dir(profile, pair, 1).parent, name)


def training_table(profile: str, pair: str) -> pd.DataFrame:
    """One row per seed with a trained model: updates, minutes, test BLEU (beam and greedy)."""
    return pair_training_table(results_dir(profile, pair, 1).parent)


def pair_training_table(pair_dir: Path) -> pd.DataFrame:
    """`training_table` of the results directory of one (profile, pair), named by the pair."""
    test, rows = main_test_set(pair_dir.name), []
    for seed in seeds_in(pair_dir, "training_results.json"):
        r = json.loads((pair_dir / f"seed{seed}" / "training_results.json").read_text())
        scores = r["test"][test]
        rows.append({"seed": seed, "updates": r["steps"], "minutes": r["train_minutes"], "test set": test,
                     "BLEU (beam)": scores["beam"]["bleu"], "BLEU (greedy)": scores["greedy"]["bleu"]})
    return pd.DataFrame(rows, columns=["seed", "updates", "minutes", "test set", "BLEU (beam)", "BLEU (greedy)"])


def committed_record(cfg: Config) -> dict | None:
    """The committed record of this config's run (`results/<profile>/<pair>/seed<seed>/
    training_results.json`, a copy of its results.json), or None if none is committed for it."""
    path = results_dir(cfg.profile, cfg.data.pair, cfg.train.seed) / "training_results.json"
    record = json.loads(path.read_text()) if path.is_file() else None
    return record if record and record["run_dir"] == run_dir(cfg).name else None  # digest: config + results version


def run_record(cfg: Config) -> dict | None:
    """What is known of this config's model: its release's card, else its run's results.json
    here, else its committed record."""
    if (path := release.release_of(cfg)) is not None:
        return release.read_card(path)
    path = run_dir(cfg) / "results.json"
    return json.loads(path.read_text()) if path.is_file() else committed_record(cfg)


def record_digest(record: dict) -> str:
    """16 hex digits over a run's record without its wall-clock and machine fields: what the run
    learned and scored, not how fast."""
    timeless = {k: v for k, v in record.items() if k not in ("train_minutes", "tokens_per_second", "machine")}
    timeless["history"] = [{k: v for k, v in h.items() if k != "minutes"} for h in record.get("history", [])]
    return hashlib.sha256(json.dumps(timeless, sort_keys=True).encode()).hexdigest()[:16]


def model_id(record: dict) -> dict:
    """Which trained model a training record (results.json) is: its run and its weights' fingerprint."""
    return {"run_dir": record.get("run_dir"), "fingerprint": record.get("fingerprint")}


class RecordedModel:
    """The final model of a run known from its committed record alone: its fingerprint, config
    and layer counts without its weights, which `load` reads (and checks against the fingerprint)
    only when a result must be computed. So a page whose results are all cached under the model's
    fingerprint runs on a machine that never trained it."""

    def __init__(self, record: dict, weights: Path):
        self.record, self.weights, self.model = record, Path(weights), None
        self.cfg = ModelConfig(**record["config"]["model"])

    def fingerprint(self) -> str:
        return self.record["fingerprint"]

    def layer_counts(self) -> dict[str, int]:
        return self.cfg.layer_counts()

    def load(self) -> Transformer:
        if self.model is not None:
            return self.model
        run, fp = self.record["run_dir"], self.fingerprint()
        if not self.weights.is_file():
            isa = self.record.get("machine", {})
            raise FileNotFoundError(
                f"{self.weights}: the weights of model {run} (fingerprint {fp}) are not on this machine, and a "
                "result computed from them is not cached. Train it (python -m headlib train --profile "
                f"{self.record['profile']} --pair {self.record['pair']} --set train.seed="
                f"{self.record['config']['train']['seed']}): on a CPU like the record's (ISA {isa.get('isa', '?')}, "
                f"bf16 {isa.get('bf16', '?')}) fp32 training is deterministic (benchmarks/same_isa_retrain.py), so "
                "that should give these weights again; elsewhere it gives another model, "
                "and every page of its (pair, seed) must then be re-executed, from Sec. 3 on")
        model = load_model(self.weights)[0]
        if model.fingerprint() != fp:
            raise ValueError(f"{self.weights}: fingerprint {model.fingerprint()}, but the committed record of {run} "
                             f"says {fp}: these weights were trained on another machine or by other code")
        self.model = model
        return model


def weights(model: Transformer | RecordedModel) -> Transformer:
    """The model itself, its weights loaded if it was known from its record only."""
    return model.load() if isinstance(model, RecordedModel) else model


def recorded_model(profile: str = "cpu", pair: str = "en-de", seed: int = 1) -> tuple[Transformer | RecordedModel, dict]:
    """The final model of (profile, pair, seed) and its record: its release, else the trained model
    if it is on this machine, else the committed record's model (`RecordedModel`, weights loaded on
    demand), else trained first."""
    cfg = get_config(profile, [f"train.seed={seed}"], pair=pair)
    if release.release_of(cfg) is not None:
        model, _, card = trained_model(profile, pair, seed)
        return model, card
    if not (run_dir(cfg) / "results.json").is_file() and (record := committed_record(cfg)) is not None:
        return RecordedModel(record, run_dir(cfg) / "final.pt"), record
    model, _, results = trained_model(profile, pair, seed)
    return model, results
