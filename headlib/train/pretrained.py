"""The `pretrained` profile: instead of training, import an opus-mt model (Tiedemann and Thottingal
2020: Marian Transformer-base, 6+6 layers of 8 heads, d_model 512, trained on OPUS, which holds
OpenSubtitles), the paper's architecture at the paper's scale, and score it as a trained run is
scored. Its run directory then serves every page as a trained run's does.

The model comes from `$HEADLIB_PRETRAINED` (a Hugging Face id or a directory written by
`save_pretrained`; "{tgt}" stands for the pair's target language), else `SOURCE`. The run's cache
key holds the source, so another source is another run; the weights' fingerprint says which model
a page read.

    final.pt     the imported weights (headlib layout), its ModelConfig, the length penalty dev chose
    tokenizer/   the model's MarianTokenizer (`save_pretrained`) and its ids, which `tokenizer_of` reads back
    results.json the model's facts (source, parameters, layers, heads, vocabulary) and test BLEU
"""
from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

from headlib import RESULTS_VERSION, __version__
from headlib.config import Config
from headlib.data.corpora import load_split, pair_languages, test_sets
from headlib.files import torch_save, write_json
from headlib.nn.decode import evaluate_bleu
from headlib.nn.hub import MarianIds, MarianTokenizerAdapter, load_pretrained, marian_config
from headlib.train.machine import machine

PROFILE = "pretrained"
SOURCE = "Helsinki-NLP/opus-mt-en-{tgt}"
CHECKED_SENTENCES = 200   # dev sources the tokenizer must give back (`load_pretrained`'s check_texts)
IDS = "headlib_ids.json"  # beside the saved tokenizer: Marian's vocabulary size and special ids (`MarianIds`)


def source(pair: str) -> str:
    """Where the pair's model comes from: $HEADLIB_PRETRAINED, else `SOURCE`, for its target language."""
    return os.environ.get("HEADLIB_PRETRAINED", SOURCE).format(tgt=pair_languages(pair)[1])


def import_run(cfg: Config, out: Path) -> dict:
    """Import the pair's model into `out` and score it: the length penalty chosen on dev among
    `train.tune_len_alpha` (beam search), then every test set of the pair, greedy and beam."""
    from transformers import AutoConfig
    name = source(cfg.data.pair)
    dev = load_split(cfg.data.pair, "dev").head(cfg.data.dev_limit)
    model, tokenizer = load_pretrained(name, check_texts=dev.src[:CHECKED_SENTENCES])
    model_cfg = marian_config(AutoConfig.from_pretrained(name))
    alphas = {a: evaluate_bleu(model, tokenizer, dev, cfg.train.beam, a)["bleu"] for a in cfg.train.tune_len_alpha}
    alpha = max(alphas, key=alphas.get)
    alphas = {str(a): bleu for a, bleu in alphas.items()}      # as the record reads back from JSON
    # the model section is the import's; the vocabulary is its own (SentencePiece, not a BPE learnt here)
    config = cfg.to_dict() | {"model": dataclasses.asdict(model_cfg),
                              "data": dataclasses.asdict(cfg.data) | {"bpe_vocab": tokenizer.vocab_size - 1}}
    tok = tokenizer.tok
    torch_save(out / "final.pt", {"model": model.state_dict(), "config": config, "version": __version__,
                                  "results_version": RESULTS_VERSION, "vocab_size": tokenizer.vocab_size,
                                  "len_alpha": alpha})
    tok.save_pretrained(out / "tokenizer")
    write_json(out / "tokenizer" / IDS, {"vocab": tokenizer.vocab_size - 1, "pad": tok.pad_token_id,
                                         "eos": tok.eos_token_id, "unk": tok.unk_token_id})
    tests = {}
    for test in test_sets(cfg.data.pair):
        corpus = load_split(cfg.data.pair, test).head(cfg.data.test_limit)
        tests[test] = {"greedy": evaluate_bleu(model, tokenizer, corpus),
                       "beam": evaluate_bleu(model, tokenizer, corpus, cfg.train.beam, alpha)}
    results = {"pair": cfg.data.pair, "profile": cfg.profile, "config": config, "version": __version__,
               "results_version": RESULTS_VERSION, "machine": machine(), "run_dir": out.name, "source": name,
               "steps": 0, "epochs": 0, "train_minutes": 0.0, "train_tokens": 0, "tokens_per_second": 0.0,
               "stopped": "imported", "parameters": model.num_parameters(), "fingerprint": model.fingerprint(),
               "layers": {"encoder": model_cfg.enc_layers, "decoder": model_cfg.dec_layers},
               "heads": model_cfg.n_heads, "vocabulary": tokenizer.vocab_size - 1, "history": [],
               "chosen_weights": "imported", "dev_beam_by_alpha": alphas, "len_alpha": alpha, "test": tests}
    write_json(out / "results.json", results)
    return results


def tokenizer_of(run: Path) -> MarianTokenizerAdapter:
    """The imported model's tokenizer, from its run directory."""
    from transformers import MarianTokenizer
    saved = json.loads((run / "tokenizer" / IDS).read_text())
    return MarianTokenizerAdapter(MarianTokenizer.from_pretrained(run / "tokenizer"),
                                  MarianIds.build(saved["vocab"], saved["pad"], saved["eos"], saved["unk"]))
