"""Corpora: Multi30k en-de / en-fr, the en-ru pool, NTREX, and any line-aligned text files.

Data are read from `$HEADLIB_DATA`, else `../shared/data`; nothing is copied into the repo.
Any other corpus (e.g. WMT) is a *local pair*: a folder `<data root>/pairs/<src>-<tgt>[.<name>]/`
(e.g. `en-de.wmt14`) of line-aligned files `<split>.<lang>` (optionally .gz) with splits `train`,
`dev` and one or more test sets; `write_local_pair` writes one from rows such as a Hugging Face
translation dataset's.
Bad input (line counts that differ, invalid UTF-8, an empty side, a malformed TSV row) raises
one `DataError` that names the file and the line.
"""
from __future__ import annotations

import gzip
import random
from dataclasses import dataclass
from pathlib import Path

from headlib.settings import settings

PAIRS = ("en-de", "en-fr", "en-ru")
MULTI30K_TESTS = ("test_2016_flickr", "test_2017_flickr", "test_2017_mscoco")
ENRU_TESTS = ("newstest2019-2020", "flores-devtest", "tatoeba-heldout")
ENRU_DEV = "newstest2018"     # the en-ru dev set (enru/dev.tsv): WMT news, 3,000 pairs
ENRU_HELDOUT_TATOEBA = 1000   # conversational test set carved out of train
ENRU_HELDOUT_SEED = 2019
NTREX_LANG = {"de": "deu", "fr": "fra", "ru": "rus"}
# The paper's two domains (WMT news vs. OpenSubtitles, Sec. 3) as parts of the en-ru pool, by
# `origin` prefix; each is a pair of its own. The news part is scored on held-out Tatoeba too
# (it is the starting point of domain adaptation).
ENRU_DOMAINS = {"en-ru.news": ("newstest", "generaltest"), "en-ru.tatoeba": ("tatoeba",)}
ENRU_DOMAIN_TESTS = {"en-ru.news": ("newstest2019-2020", "tatoeba-heldout"), "en-ru.tatoeba": ("tatoeba-heldout",)}
ENRU_TATOEBA_DEV = 1000       # the Tatoeba part's dev set, carved out of its train (seed + 1)


class DataError(ValueError):
    """Malformed corpus input; the message names the file and the line."""


@dataclass(frozen=True)
class Corpus:
    name: str
    src: tuple[str, ...]
    tgt: tuple[str, ...]
    origin: tuple[str, ...] | None = None   # en-ru: the source set of each pair

    def __len__(self) -> int:
        return len(self.src)

    def head(self, n: int) -> "Corpus":
        if n <= 0 or n >= len(self):
            return self
        origin = self.origin[:n] if self.origin else None
        return Corpus(self.name, self.src[:n], self.tgt[:n], origin)

    def where(self, keep) -> "Corpus":
        """The pairs whose origin satisfies `keep(origin)`."""
        idx = [i for i, o in enumerate(self.origin or ()) if keep(o)]
        return Corpus(self.name, tuple(self.src[i] for i in idx), tuple(self.tgt[i] for i in idx),
                      tuple(self.origin[i] for i in idx))


def data_root() -> Path:
    """`settings().data`: $HEADLIB_DATA, else ../shared/data beside the repository."""
    root = settings().data
    if not root.is_dir():
        raise DataError(f"no data directory at {root}: set HEADLIB_DATA to a folder holding multi30k/, enru/, "
                        "ntrex/, ud/; see ../shared/data/README.md for the sources")
    return root


def mean_words(sentences) -> float:
    """Mean words (whitespace tokens) per sentence; 0 for none."""
    return sum(len(s.split()) for s in sentences) / len(sentences) if len(sentences) else 0.0


def read_lines(path: str | Path) -> list[str]:
    """Lines of a UTF-8 text file (optionally .gz), newline stripped; empty lines are errors."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    opener = gzip.open if path.suffix == ".gz" else open
    lines = []
    with opener(path, "rb") as f:
        for n, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError as e:
                raise DataError(f"{path}:{n}: invalid UTF-8 ({e.reason} at byte {e.start})") from None
            if not line.strip():
                raise DataError(f"{path}:{n}: empty line (every pair needs both sides)")
            lines.append(line)
    return lines


def read_parallel(src_path: str | Path, tgt_path: str | Path, name: str = "") -> Corpus:
    """Two line-aligned files: one sentence a line, same number of lines."""
    src, tgt = read_lines(src_path), read_lines(tgt_path)
    if len(src) != len(tgt):
        raise DataError(f"{src_path} has {len(src)} lines but {tgt_path} has {len(tgt)}: "
                        "files must be line-aligned")
    return Corpus(name or Path(src_path).stem, tuple(src), tuple(tgt))


def read_tsv(path: str | Path, name: str = "") -> Corpus:
    """`origin<TAB>source<TAB>target` rows (the en-ru pool)."""
    origin, src, tgt = [], [], []
    for n, line in enumerate(read_lines(path), 1):
        parts = line.split("\t")
        if len(parts) != 3 or not parts[1].strip() or not parts[2].strip():
            raise DataError(f"{path}:{n}: expected origin<TAB>source<TAB>target with both sides "
                            f"non-empty, got {len(parts)} field(s)")
        origin.append(parts[0]); src.append(parts[1]); tgt.append(parts[2])
    return Corpus(name or Path(path).stem, tuple(src), tuple(tgt), tuple(origin))


def _multi30k(root: Path, lang: str, split: str) -> Corpus:
    d = root / "multi30k"
    return read_parallel(d / f"{split}.en.gz", d / f"{split}.{lang}.gz", name=split)


def _enru_train_heldout(root: Path) -> tuple[Corpus, Corpus]:
    """Train minus 1,000 Tatoeba pairs (fixed seed), and those pairs as a conversational test."""
    pool = read_tsv(root / "enru" / "train.tsv", name="train")
    tatoeba = [i for i, o in enumerate(pool.origin) if o.startswith("tatoeba")]
    held = set(random.Random(ENRU_HELDOUT_SEED).sample(tatoeba, ENRU_HELDOUT_TATOEBA))
    pick = lambda idx, name: Corpus(name, tuple(pool.src[i] for i in idx),
                                    tuple(pool.tgt[i] for i in idx), tuple(pool.origin[i] for i in idx))
    keep = [i for i in range(len(pool)) if i not in held]
    return pick(keep, "train"), pick(sorted(held), "tatoeba-heldout")


def _enru_domain(pair: str, split: str, root: Path) -> Corpus:
    """A domain part of the en-ru pool: its train pairs; dev = `ENRU_DEV` (news) or 1,000 more
    Tatoeba pairs carved out of train (Tatoeba); tests as for en-ru."""
    if split not in ("train", "dev") + ENRU_DOMAIN_TESTS[pair]:
        raise DataError(f"unknown split {split!r} for {pair}; valid: train, dev, {', '.join(ENRU_DOMAIN_TESTS[pair])}")
    if split not in ("train", "dev") or (split == "dev" and pair == "en-ru.news"):
        return load_split("en-ru", split, root)
    part = load_split("en-ru", "train", root).where(lambda o: o.startswith(ENRU_DOMAINS[pair]))
    if pair == "en-ru.news":
        return part
    dev = set(random.Random(ENRU_HELDOUT_SEED + 1).sample(range(len(part)), ENRU_TATOEBA_DEV))
    idx = sorted(dev) if split == "dev" else [i for i in range(len(part)) if i not in dev]
    return Corpus(split, tuple(part.src[i] for i in idx), tuple(part.tgt[i] for i in idx),
                  tuple(part.origin[i] for i in idx))


LOCAL_PAIRS = "pairs"   # <data root>/pairs/<src>-<tgt>[.<name>]/<split>.<lang>[.gz]


def pair_languages(pair: str) -> tuple[str, str]:
    """("en", "de") of "en-de" or of a local pair "en-de.wmt14"."""
    langs = pair.split(".", 1)[0].split("-")
    if len(langs) != 2 or not all(langs):
        raise DataError(f"a pair is <src>-<tgt> or <src>-<tgt>.<name>, got {pair!r}")
    return langs[0], langs[1]


def local_pair_dir(pair: str, root: str | Path | None = None) -> Path:
    """The folder of a local pair; an error that says what a pair must be if there is none."""
    d = (Path(root) if root else data_root()) / LOCAL_PAIRS / pair
    pair_languages(pair)
    if not d.is_dir():
        raise DataError(f"unknown pair {pair!r}; valid pairs: {', '.join(PAIRS)}, or a local pair: a folder "
                        f"{d} with train.<src>, train.<tgt>, dev.* and test files (see write_local_pair)")
    return d


def _local_file(d: Path, split: str, lang: str) -> Path:
    plain = d / f"{split}.{lang}"
    return plain if plain.is_file() or not (d / f"{split}.{lang}.gz").is_file() else d / f"{split}.{lang}.gz"


def _local_splits(pair: str, root: str | Path | None = None) -> tuple[str, ...]:
    d, (src, tgt) = local_pair_dir(pair, root), pair_languages(pair)
    names = {f.name.removesuffix(".gz").rsplit(".", 1)[0] for f in d.iterdir()}
    return tuple(sorted(n for n in names if _local_file(d, n, src).is_file() and _local_file(d, n, tgt).is_file()))


def write_local_pair(rows, pair: str, split: str, root: str | Path) -> dict:
    """Write one split of a local pair under `root`: `rows` are (source, target) tuples or
    translation-dataset records {"translation": {src: ..., tgt: ...}} (Hugging Face `datasets`,
    e.g. load_dataset("wmt19", "ru-en", split="train")). Newlines inside a sentence become spaces;
    rows with an empty side are skipped and counted. Both files are written atomically."""
    from headlib.files import write_text
    src_lang, tgt_lang = pair_languages(pair)
    src, tgt, skipped = [], [], 0
    for row in rows:
        s, t = (row["translation"][src_lang], row["translation"][tgt_lang]) if isinstance(row, dict) else row
        s, t = (" ".join(x.split()) for x in (s, t))
        if not s or not t:
            skipped += 1
            continue
        src.append(s); tgt.append(t)
    d = Path(root) / LOCAL_PAIRS / pair
    d.mkdir(parents=True, exist_ok=True)
    write_text(d / f"{split}.{src_lang}", "".join(x + "\n" for x in src))
    write_text(d / f"{split}.{tgt_lang}", "".join(x + "\n" for x in tgt))
    return {"pairs": len(src), "skipped": skipped}


def load_split(pair: str, split: str, root: str | Path | None = None) -> Corpus:
    """One split of a language pair: `train`, `dev`, or a name from `test_sets(pair)`."""
    root = Path(root) if root else data_root()
    if pair in ENRU_DOMAINS:
        return _enru_domain(pair, split, root)
    if pair not in PAIRS:
        if split not in _local_splits(pair, root):
            raise DataError(f"unknown split {split!r} for {pair}; valid: {', '.join(_local_splits(pair, root))}")
        d, langs = local_pair_dir(pair, root), pair_languages(pair)
        return read_parallel(*(_local_file(d, split, lang) for lang in langs), name=split)
    if pair in ("en-de", "en-fr"):
        lang = pair[3:]
        name = {"dev": "val"}.get(split, split)
        if name not in ("train", "val") + MULTI30K_TESTS:
            raise DataError(f"unknown split {split!r} for {pair}; valid: train, dev, {', '.join(MULTI30K_TESTS)}")
        return _multi30k(root, lang, name)
    if split in ("train", "tatoeba-heldout"):
        train, held = _enru_train_heldout(root)
        return train if split == "train" else held
    if split == "dev":
        return read_tsv(root / "enru" / "dev.tsv", name="dev")
    test = read_tsv(root / "enru" / "test.tsv", name=split)
    if split == "newstest2019-2020":
        return test.where(lambda o: o.startswith(("newstest2019", "newstest2020")))
    if split == "flores-devtest":
        return test.where(lambda o: o.startswith("flores"))
    raise DataError(f"unknown split {split!r} for en-ru; valid: train, dev, {', '.join(ENRU_TESTS)}")


def test_sets(pair: str) -> tuple[str, ...]:
    if pair in ENRU_DOMAINS:
        return ENRU_DOMAIN_TESTS[pair]
    if pair in PAIRS:
        return ENRU_TESTS if pair == "en-ru" else MULTI30K_TESTS
    return tuple(n for n in _local_splits(pair) if n not in ("train", "dev"))


def main_test_set(pair: str) -> str:
    return test_sets(pair)[0]


def load_ntrex(lang: str, root: str | Path | None = None) -> Corpus:
    """NTREX-128: the newstest2019 English source with references in de, fr or ru."""
    root = Path(root) if root else data_root()
    if lang not in NTREX_LANG:
        raise DataError(f"NTREX target must be one of {', '.join(NTREX_LANG)}, got {lang!r}")
    d = root / "ntrex"
    return read_parallel(d / "newstest2019-src.eng.txt", d / f"newstest2019-ref.{NTREX_LANG[lang]}.txt",
                         name=f"ntrex-en-{lang}")


def analysis_sentences(pair: str, n: int = 0, root: str | Path | None = None) -> list[str]:
    """Held-out English sentences of the pair's own domain for head analysis (Sec. 4-5): the
    Multi30k val, test_2017_flickr and test_2017_mscoco sources (2,475; test_2016_flickr stays the
    BLEU test), or the dev set (en-ru: `ENRU_DEV`, 3,000; a local pair: its dev; the Tatoeba
    part: its dev and held-out test, 2,000). The first `n` (0 = all)."""
    if pair == "en-ru.tatoeba":
        sents = [s for split in ("dev", "tatoeba-heldout") for s in load_split(pair, split, root).src]
    elif pair not in ("en-de", "en-fr"):
        sents = list(load_split(pair, "dev", root).src)
    else:
        sents = [s for split in ("dev", "test_2017_flickr", "test_2017_mscoco")
                 for s in load_split(pair, split, root).src]
    return sents[:n] if n > 0 else sents
