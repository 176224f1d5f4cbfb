"""The result tables pages hand to one another, and which page writes each.

A unit's tables live in `results/<profile>/<pair>/seed<seed>/` (`headlib.settings.results_dir`).
A page that reads another page's table reads it with `read_table`, so that a page run by hand
before its upstream page fails with one line naming the page to run first.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

# table -> the notebook (notebooks/<name>.ipynb) that writes it
WRITERS = {
    **dict.fromkeys(("head_importance.csv", "lrp_rules.csv", "null_head_importance.csv"), "04_important_heads"),
    **dict.fromkeys(("positional_heads.csv", "syntactic_accuracy.csv", "syntactic_best.csv",
                     "syntactic_gold_vs_spacy.csv", "rare_word_rates.csv", "null_positional_heads.csv",
                     "null_syntactic_best.csv", "null_rare_word_rates.csv"), "05_head_functions"),
    **dict.fromkeys(("pruning_encoder.csv", "pruning_encoder_scratch.csv", "pruning_enrichment.csv",
                     "pruning_survival.csv", "pruning_functions.csv"), "06_pruning_encoder"),
    **dict.fromkeys(("pruning_all_attention.csv", "pruning_all_budgets.csv"), "07_pruning_all_attention"),
    **dict.fromkeys(("importance_measures.csv", "pruning_orders.csv", "pruning_methods.csv"), "08_beyond"),
    **dict.fromkeys(("single_head_ablation.csv", "head_types.csv", "constant_attention.csv", "attention_sparsity.csv",
                     "attention_quantization.csv", "rollout.csv", "crosslingual_agreement.csv",
                     "crosslingual_layers.csv", "lottery.csv", "refined_lrp.csv", "around_studies.csv"), "10_around"),
    "adaptation.csv": "12_domains",
    "claims.csv": "09_claims",
}


class MissingTable(FileNotFoundError):
    """A result table that its page has not written yet; the message names that page."""

    def __init__(self, path: Path):
        super().__init__(missing_message(path))
        self.path = Path(path)


def read_table(folder: str | Path, name: str) -> pd.DataFrame:
    """The table `name` of the unit folder `folder` (results/<profile>/<pair>/seed<seed>)."""
    path = Path(folder) / name
    if not path.is_file():
        raise MissingTable(path)
    return pd.read_csv(path)


def missing_message(path: Path) -> str:
    """One line: the table is missing, and the command that runs the page that writes it."""
    writer, folder = WRITERS.get(path.name), path.parent
    if writer is None:
        return f"{path}: missing"
    profile, pair, seed = folder.parent.parent.name, folder.parent.name, folder.name.removeprefix("seed")
    return (f"{path}: missing; it is written by the page notebooks/{writer}.ipynb: run that page first "
            f"(python -m headlib.book run --profile {profile} --pairs {pair} --seeds {seed} --notebooks {writer})")
