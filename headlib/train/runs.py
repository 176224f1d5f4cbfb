"""Where a run lives and how its model is read back: the run directory of a config, the model
before its first update, a finished run's model and tokenizer (its release's, where it has one)."""
from __future__ import annotations

from pathlib import Path

import torch

from headlib import RESULTS_VERSION
from headlib.config import Config, ModelConfig
from headlib.data.bpe import BPE
from headlib.files import CheckpointError, artifacts_dir, first_line, load_checkpoint
from headlib.nn.model import Transformer
from headlib.train import pretrained, release


def run_dir(cfg: Config) -> Path:
    """A run's directory, keyed by its config and the results version (and an imported model's source)."""
    imported = cfg.profile == pretrained.PROFILE
    key = f"results-v{RESULTS_VERSION}" + (f" from {pretrained.source(cfg.data.pair)}" if imported else "")
    return artifacts_dir() / "runs" / f"{cfg.data.pair}-{cfg.profile}-{cfg.digest(key)}"


def initial_model(cfg: Config, vocab_size: int, keep_rng: bool = False) -> Transformer:
    """A run's model before its first update: the config's architecture initialised from its seed
    (the global RNG is seeded, as training needs it to be; `keep_rng`: restored afterwards)."""
    with torch.random.fork_rng(enabled=keep_rng):
        torch.manual_seed(cfg.train.seed)
        return Transformer(cfg.model, vocab_size)


def load_model(path: str | Path, map_location="cpu", user_file: bool = False) -> tuple[Transformer, BPE, dict]:
    """The final model of a run (its `final.pt`, beside `bpe.json`, or an imported model's
    tokenizer), in eval mode; `user_file`: a path the user named (`load_checkpoint`)."""
    path = Path(path)
    ckpt = load_checkpoint(path, "trained model", map_location=map_location, user_file=user_file)
    try:
        model = Transformer(ModelConfig(**ckpt["config"]["model"]), ckpt["vocab_size"])
        model.load_state_dict(ckpt["model"])
    except (KeyError, TypeError, RuntimeError) as e:   # another layout: saved by other code
        version = ckpt.get("version", "?") if isinstance(ckpt, dict) else "?"
        raise CheckpointError(f"{path}: not a trained model of this headlib (saved by version {version}): "
                              f"{first_line(e)}") from None
    model.eval()
    return model, run_tokenizer(path.parent), ckpt


def model_tokenizer(cfg: Config) -> BPE | pretrained.MarianTokenizerAdapter:
    """The tokenizer of a config's model: its release's, else its run's (`run_tokenizer`)."""
    if (path := release.release_of(cfg)) is not None:
        return BPE.load(path / release.TOKENIZER)
    return run_tokenizer(run_dir(cfg))


def run_tokenizer(run: Path) -> BPE | pretrained.MarianTokenizerAdapter:
    """A run's tokenizer: its joint BPE (`bpe.json`), or an imported model's own (`tokenizer/`)."""
    if (run / "tokenizer").is_dir():
        return pretrained.tokenizer_of(run)
    if not (run / "bpe.json").is_file():
        raise CheckpointError(f"{run}: no tokenizer beside the model (bpe.json, or tokenizer/ for an imported model)")
    return BPE.load(run / "bpe.json")
