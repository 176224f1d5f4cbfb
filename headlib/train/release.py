"""Released models: a trained run's final weights kept in the repository, so that every page and
command reads the same model on any machine (as a model zoo's release: weights, tokenizer, card).

    models/<profile>/<pair>/seed<seed>/
        model.safetensors   the weights (fp16 unless that moves a test BLEU by more than
                            `MAX_BLEU_SHIFT` against the training copy; then fp32)
        tokenizer.json      the run's joint BPE (HF `tokenizers`)
        card.json           the run's record (config, recipe, updates, machine, training time, dev
                            curve) with the release's own scores, computed on the released weights
        README.md           the same card, short, for people

A release's fingerprint is the SHA-256 of its weights file (`FINGERPRINT_DIGITS` hex digits where
a page names it). `write_release` builds a release in a temporary folder beside its destination
and moves it there whole; `load_release` checks the weights against the card's digest.
The cpu profile's releases are committed; any other profile's go under artifacts/models/.
Releases are read first whenever a (profile, pair, seed)'s model is asked for, unless
$HEADLIB_RELEASES=0 (a `make study` that retrains from nothing).
"""
from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_model as load_weights
from safetensors.torch import save_model

from headlib import RESULTS_VERSION, __version__
from headlib.config import Config, ModelConfig, get_config
from headlib.data.bpe import BPE
from headlib.data.corpora import load_split, test_sets
from headlib.files import write_json, write_text
from headlib.nn.decode import evaluate_bleu
from headlib.nn.model import Transformer
from headlib.settings import rel, settings

WEIGHTS, TOKENIZER, CARD, README = "model.safetensors", "tokenizer.json", "card.json", "README.md"
MAX_BLEU_SHIFT = 0.1        # the most a test BLEU may move from the training copy for fp16 weights
MAX_BYTES = 30 * 2 ** 20    # a release's size in git
FINGERPRINT_DIGITS = 12


class ReleaseError(ValueError):
    """A release that is missing, incomplete, or whose weights are not the card's."""


@dataclass
class Release:
    model: Transformer
    tokenizer: BPE
    card: dict
    path: Path

    @property
    def fingerprint(self) -> str:
        return self.card["fingerprint"]


def releases_enabled() -> bool:
    """Whether a model is read from its release when there is one ($HEADLIB_RELEASES, default on)."""
    return os.environ.get("HEADLIB_RELEASES", "1") not in ("0", "false", "no")


def release_dir(profile: str, pair: str, seed: int) -> Path:
    """Where (profile, pair, seed)'s release lives: the cpu profile's in the repository's models/,
    any other profile's under artifacts/models/ (so that test runs never touch the committed ones)."""
    s = settings()
    return (s.models if profile == "cpu" else s.artifacts / "models") / profile / pair / f"seed{seed}"


def release_of(cfg: Config) -> Path | None:
    """The release of a config's run, or None: a release is of (profile, pair, seed) and holds the
    run of that profile's config alone (a config with other overrides has no release). A release of
    another config or results version (the code's recipe changed since) is an error, not a model."""
    path = release_dir(cfg.profile, cfg.data.pair, cfg.train.seed)
    if not releases_enabled() or not (path / CARD).is_file():
        return None
    default = get_config(cfg.profile, [f"train.seed={cfg.train.seed}"], pair=cfg.data.pair)
    if cfg.digest() != default.digest():        # speed-only keys (threads) aside
        return None
    card = read_card(path)
    if Config.from_dict(card["config"]).digest() != cfg.digest() or card["results_version"] != RESULTS_VERSION:
        raise ReleaseError(f"{path}: a release of run {card['run_dir']}, trained with another config or results "
                           f"version than this code's {cfg.profile} profile; train and release it again (make study "
                           f"UNITS={cfg.data.pair}/{cfg.train.seed})")
    return path


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def read_card(path: Path) -> dict:
    """A release's card.json; one line naming the file if it is missing or not JSON."""
    card = Path(path) / CARD
    try:
        return json.loads(card.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ReleaseError(f"{card}: no release card (the release is incomplete)") from None
    except json.JSONDecodeError as e:
        raise ReleaseError(f"{card}: not JSON (line {e.lineno}): the release is corrupt") from None


def load_release(path: str | Path) -> Release:
    """The model of a release folder, in eval mode, after checking its weights against its card."""
    path = Path(path)
    card = read_card(path)
    weights = path / WEIGHTS
    if not weights.is_file():
        raise ReleaseError(f"{weights}: missing (the release is incomplete)")
    digest = file_sha256(weights)
    if digest != card["release"]["sha256"]:
        raise ReleaseError(f"{weights}: SHA-256 {digest[:FINGERPRINT_DIGITS]}, but {path / CARD} says "
                           f"{card['fingerprint']}: the weights were changed after the release")
    model = Transformer(ModelConfig(**card["config"]["model"]), card["release"]["vocab_size"])
    load_weights(model, weights)   # fp16 weights are copied into the fp32 model
    model.eval()
    return Release(model, BPE.load(path / TOKENIZER), card, path)


def save_weights(model: Transformer, path: Path, dtype: torch.dtype) -> None:
    """The model's parameters in `dtype` (buffers as they are), tied tensors once (safetensors)."""
    copy_ = copy.deepcopy(model)
    for p in copy_.parameters():
        p.data = p.data.to(dtype)
    save_model(copy_, str(path), metadata={"format": "pt", "headlib": __version__, "dtype": str(dtype)})


def score_tests(model: Transformer, bpe: BPE, cfg: Config, alpha: float) -> dict:
    """Every test set of the pair, greedy and beam (the record's "test" layout)."""
    return {name: {"greedy": evaluate_bleu(model, bpe, corpus),
                   "beam": evaluate_bleu(model, bpe, corpus, cfg.train.beam, alpha)}
            for name in test_sets(cfg.data.pair)
            for corpus in [load_split(cfg.data.pair, name).head(cfg.data.test_limit)]}


def bleu_shifts(release: dict, training: dict) -> dict[str, float]:
    """Release BLEU minus training-copy BLEU per "test set/decoding"."""
    return {f"{name}/{mode}": round(release[name][mode]["bleu"] - training[name][mode]["bleu"], 2)
            for name in training for mode in training[name]}


def write_release(model: Transformer, bpe: BPE, record: dict, dest: Path, log=print) -> dict:
    """Release `model`, the final model of a finished run whose record (results.json) is `record`,
    with its tokenizer, into `dest`, atomically (a temporary folder beside it, moved in whole).
    Returns the card."""
    dest, cfg = Path(dest), Config.from_dict(record["config"])
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    t0 = time.time()
    try:
        for dtype in (torch.float16, torch.float32):
            save_weights(model, tmp / WEIGHTS, dtype)
            released = copy.deepcopy(model)
            load_weights(released, tmp / WEIGHTS)
            log(f"release: scoring the {dtype} weights on {', '.join(test_sets(cfg.data.pair))} (greedy and beam)")
            tests = score_tests(released.eval(), bpe, cfg, record["len_alpha"])
            shifts = bleu_shifts(tests, record["test"])
            if max(map(abs, shifts.values())) <= MAX_BLEU_SHIFT:
                break
            log(f"release: {dtype} moves a test BLEU by more than {MAX_BLEU_SHIFT}: {shifts}")
        size = (tmp / WEIGHTS).stat().st_size
        if size > MAX_BYTES:
            raise ReleaseError(f"{record['run_dir']}: the {dtype} weights take {size / 2 ** 20:.1f} MiB, over the "
                               f"{MAX_BYTES / 2 ** 20:.0f} MiB a release may take")
        bpe.save(tmp / TOKENIZER)
        sha = file_sha256(tmp / WEIGHTS)
        card = record | {
            "fingerprint": sha[:FINGERPRINT_DIGITS], "test": tests,
            "release": {"sha256": sha, "dtype": str(dtype).removeprefix("torch."), "bytes": size,
                        "vocab_size": bpe.vocab_size, "headlib": __version__, "path": rel(dest),
                        # the loaded model's `Transformer.fingerprint()`: what results computed from it record
                        "loaded_fingerprint": released.fingerprint(),
                        "minutes": round((time.time() - t0) / 60, 2)},   # saving and scoring the release
            "training_copy": {"fingerprint": record["fingerprint"], "test": record["test"], "bleu_shift": shifts}}
        write_json(tmp / CARD, card)
        write_text(tmp / README, card_markdown(card))
        for f in tmp.iterdir():
            f.chmod(0o644)
        tmp.chmod(0o755)
        old = dest.with_name(f".{dest.name}.old")
        if dest.exists():
            os.replace(dest, old)
        os.replace(tmp, dest)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return card


def card_markdown(card: dict) -> str:
    """The short model card (Markdown) of a release's card.json."""
    r, m, t, rel = card, card["config"]["model"], card["config"]["train"], card["release"]
    mach = r.get("machine", {})
    rows = "\n".join(f"| {name} | {s['greedy']['bleu']:.2f} | {s['beam']['bleu']:.2f} | "
                     f"{r['training_copy']['test'][name]['beam']['bleu']:.2f} |" for name, s in r["test"].items())
    sig = next(iter(r["test"].values()))["beam"]["bleu_signature"]
    curve = ", ".join(f"{h['step']}: {h['dev_bleu']:.2f}" for h in r.get("history", []))
    return f"""# headlib {r['profile']} {r['pair']} seed {r['config']['train']['seed']}

A Transformer encoder-decoder with a gate on every attention head (headlib), trained to study
Voita et al. (ACL 2019), *Analyzing Multi-Head Self-Attention*. Not a production translation model.

- **Fingerprint** (SHA-256 of `model.safetensors`): `{r['fingerprint']}` ({rel['dtype']}, {rel['bytes']:,} bytes)
- **Run**: `{r['run_dir']}` (config digest and results version {r['results_version']}), headlib {r['version']}
- **Model**: {m['enc_layers']}+{m['dec_layers']} layers x {m['n_heads']} heads, d_model {m['d_model']}, d_ff {m['d_ff']},
  {m['norm']}-LN, {r['parameters']:,} parameters, joint BPE of {r['config']['data']['bpe_vocab']:,}
- **Recipe**: {r['steps']:,} updates of {t['max_tokens']:,} target tokens, peak lr {t['lr']:g} after {t['warmup']:,}
  warmup updates, {t['schedule']} decay, label smoothing {t['label_smoothing']}, {'bf16' if t['bf16'] else 'fp32'};
  weights: {r['chosen_weights']} on dev; length penalty alpha {r['len_alpha']} (chosen on dev)
- **Trained on**: {mach.get('device', '?')}, ISA {mach.get('isa', '?')}, bf16 {mach.get('bf16', '?')},
  {mach.get('threads', '?')} threads, torch {mach.get('torch', '?')}: {r['train_minutes']:.1f} minutes
- **Dev BLEU (greedy) during training**: {curve}

## Test BLEU of the released weights

| test set | greedy | beam {t['beam']} | beam, training copy |
|---|---|---|---|
{rows}

sacreBLEU: `{sig}`

`python -m headlib translate --profile {r['profile']} --pair {r['pair']} --seed {r['config']['train']['seed']}`
reads this release. `card.json` holds the whole record.
"""
