"""What the book is made of: its notebooks (one page per pair and seed each), in dependency order,
and the (notebook, profile, pair, seed) tasks of a run.

Each (notebook, pair, seed) is executed with the parameters `profile`, `pair` and `seed` (and no
others: a page's sizes come from its profile's grids, `headlib.profiles.Grids`), so batch reruns
write each pair and seed into its own output and a run for one pair keeps the outputs of the others.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from headlib.settings import settings


PARAMETERS = ("profile", "pair", "seed")   # what every notebook's `parameters` cell declares


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
    needs: str = ""                # what must be computed before it can be executed from a release, and the
                                   # command that computes it ({profile}, {pair}, {seed} filled in); "": nothing
    on_imported: bool = True       # runs on an imported model (the pretrained profile); not a page that
                                   # compares training seeds or trains models of its own
    front: bool = False            # first in the table of contents (the study's answer), though executed last


# Every seed's training record of the page's pair: the seed spread (`claims.seed_spread`) that
# Sec. 6.2's and Beyond's verdicts are judged against changes when another seed is trained.
SEED_SPREAD = "{pair}/seed*/training_results.json"

# In dependency order of the paper's sections; `after` makes the order explicit.
NOTEBOOKS: tuple[Notebook, ...] = (
    Notebook("03_data_and_models", "Sec. 3 — Data and models", trains=True,
             needs="the unit's release: python -m headlib train --profile {profile} --pair {pair} --seed {seed}, then "
                   "python -m headlib release with the same arguments"),
    Notebook("04_important_heads", "Sec. 4 — Important heads", after=("03_data_and_models",), trains=True),
    Notebook("05_head_functions", "Sec. 5 — Characterizing heads", after=("04_important_heads",), trains=True),
    Notebook("06_pruning_encoder", "Sec. 6.2 — Pruning the encoder", after=("05_head_functions",), trains=True,
             reads=(SEED_SPREAD,),
             needs="the Hard Concrete path from the release, its validation lambdas and the from-scratch baselines: "
                   "python -m headlib.pruning curve --profile {profile} --pair {pair} --setting encoder, then "
                   "scratches"),
    Notebook("07_pruning_all_attention", "Sec. 6.3 — Pruning all attention", after=("06_pruning_encoder",), trains=True,
             needs="the same for all three attention kinds: python -m headlib.pruning curve --profile "
                   "{profile} --pair {pair} --setting all, then scratches"),
    Notebook("08_beyond", "Beyond the paper", after=("06_pruning_encoder",), trains=True, reads=(SEED_SPREAD,),
             needs="Sec. 6.2, then the fine-tuned methods at each head count (Michel et al., DSP, random and top-k "
                   "masks) from the release"),
    # trains its own domain models; before 10_around, which reads its adaptation table (A7)
    Notebook("12_domains", "Domains and adaptation (en-ru)", pair="en-ru", on_imported=False,
             needs="releases of the two domain models and their adaptations: python -m headlib.studies.domains "
                   "--profile {profile}"),
    Notebook("10_around", "Around the paper", after=("04_important_heads", "06_pruning_encoder"), trains=True,
             reads=("{pair}/seed{seed}/pruning/enc-self-lam*.json",   # A6: Hard Concrete's encoder points
                    "{pair}/seed{seed}/pruning/scratch-*.json",        # and their from-scratch runs
                    "en-ru.news/seed{seed}/adaptation.csv",           # A7's verdict (12_domains)
                    "*/seed{seed}/head_profiles.json"),               # A5: each compared pair's heads
             needs="Sec. 6.2 and Domains, the en-fr release (A5) and the lottery ticket: python -m "
                   "headlib.pruning.lottery --profile {profile} --pair {pair}"),
    Notebook("09_claims", "Claims", after=("05_head_functions",), reads=tuple(
        f"*/seed{{seed}}/{name}" for name in ("head_importance.csv", "lrp_rules.csv", "positional_heads.csv", "syntactic_best.csv",
                                              "rare_word_rates.csv", "null_*.csv", "pruning_*.csv"))),
    # every unit's verdicts in one matrix, from the tables each Claims and Around page wrote: once for the book
    Notebook("01_verdicts", "The verdicts", after=("09_claims", "10_around", "11_seeds"), pair="en-de",
             on_imported=False, front=True, reads=("*/seed*/claims.csv", "*/seed*/around_studies.csv")),
    Notebook("11_seeds", "Across seeds", after=("05_head_functions",), across_seeds=True, on_imported=False,
             reads=("{pair}/seed*/*.csv", "{pair}/seed*/training_results.json"),
             needs="the releases of the pair's other seeds, with their Sec. 3-5 pages"),
)

# Hand-written pages: the root, and parts after the notebooks' parts.
ROOT_PAGE = "intro"


CLOSING_PARTS = (("Using this book", ("reproduce", "glossary")),)


class BookError(RuntimeError):
    """A notebook failed, or the book is inconsistent; the message says where."""


def default_out(profile: str) -> Path:
    """`book/` for the cpu profile (committed); `artifacts/book-<profile>/` for the others."""
    return settings().book if profile == "cpu" else settings().artifacts / f"book-{profile}"


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
        return {"profile": self.profile, "pair": self.pair, "seed": self.seed}

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


def clock(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}"
