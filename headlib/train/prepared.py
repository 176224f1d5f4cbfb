"""A config's training data, ready for a loop: the pairs as BPE ids, the dev pairs, the tokenizer
and the source pieces' frequencies."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from headlib.config import Config
from headlib.data.batching import Encoded
from headlib.data.bpe import BPE, cached_bpe, piece_frequencies
from headlib.data.corpora import Corpus, load_split
from headlib.train import pretrained, release
from headlib.train.runs import model_tokenizer


@dataclass
class Prepared:
    bpe: BPE
    train: Encoded
    dev: Corpus
    src_freq: Counter   # training frequency of each source piece (rare-token rates, Sec. 5.3)


def prepare_data(cfg: Config) -> Prepared:
    """The pair's training pairs as ids (and its dev pairs, its tokenizer, the source pieces'
    frequencies): with the joint BPE learned on them, or the model's own tokenizer where it has a
    release or was imported (the pretrained profile, whose model must have been imported first)."""
    train = load_split(cfg.data.pair, "train").head(cfg.data.train_limit)
    dev = load_split(cfg.data.pair, "dev").head(cfg.data.dev_limit)
    bpe = (model_tokenizer(cfg) if cfg.profile == pretrained.PROFILE or release.release_of(cfg) else
           cached_bpe(train.src, train.tgt, cfg.data.bpe_vocab))
    return Prepared(bpe, encode_corpus(bpe, train, cfg.data.max_len), dev, piece_frequencies(bpe, train.src))


def encode_corpus(bpe: BPE, corpus: Corpus, max_len: int) -> Encoded:
    """The pairs of `corpus` as BPE ids, without pairs that have a side longer than `max_len`."""
    src, tgt = bpe.encode_batch(corpus.src), bpe.encode_targets(corpus.tgt)
    keep = [i for i in range(len(src)) if 0 < len(src[i]) <= max_len and 0 < len(tgt[i]) <= max_len]
    return Encoded([src[i] for i in keep], [tgt[i] for i in keep])
