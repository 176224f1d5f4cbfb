"""The committed training records of a (profile, pair), one per seed
(`results/<profile>/<pair>/seed<seed>/training_results.json`): which seeds have one, and their
updates, minutes and test BLEU as a table. Read by the seeds study and by the claims (seed spread).
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from .data import main_test_set
from .results import results_dir


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
