"""Atomic writes: write to a temporary file beside the target, then rename.

A crash leaves either the old file or the new one, never half of one (as fairseq does for
checkpoints).
"""
from __future__ import annotations

import hashlib
import json
import os
import pickle
import tempfile
import zipfile
from pathlib import Path
from typing import Any, Callable

from headlib.settings import settings


def atomic_write(path: str | Path, write: Callable[[Path], None]) -> Path:
    """Call `write(tmp_path)`, then atomically move tmp_path to `path`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(tmp)
    try:
        write(tmp)
        umask = os.umask(0); os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)   # mkstemp creates 0600; give the file normal permissions
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def file_digest(path: str | Path) -> str:
    """First 16 hex digits of the file's SHA-256: what a cache key records of a file it read."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


def write_text(path: str | Path, text: str) -> Path:
    return atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def write_json(path: str | Path, obj: Any) -> Path:
    return write_text(path, json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def torch_save(path: str | Path, obj: Any) -> Path:
    import torch
    return atomic_write(path, lambda tmp: torch.save(obj, tmp))


class CheckpointError(ValueError):
    """A checkpoint that is missing, unreadable, or from another config or results version."""


def load_checkpoint(path: str | Path, what: str = "checkpoint", *, config: dict | None = None,
                    ignore: tuple[str, ...] = (), results_version: int | None = None, map_location="cpu",
                    weights_only: bool = False, user_file: bool = False) -> Any:
    """`torch.load(path)`, with one line naming the file when it is missing, truncated or corrupt,
    or (given them) saved under another `config` (but for its dotted keys `ignore`) or
    `results_version` than the caller's. A cache's error says to delete it; a `user_file` (a
    path the user gave) is never to be deleted, so its error says what the file is not."""
    import torch
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: no {what} (the file does not exist)")
    try:
        ckpt = torch.load(path, map_location=map_location, weights_only=weights_only)
    except (pickle.UnpicklingError, EOFError, RuntimeError, zipfile.BadZipFile, ValueError, ImportError,
            AttributeError, OSError) as e:
        # a truncated zip archive (RuntimeError or OSError from torch's reader), a bad pickle, a text file
        # (ValueError from the legacy reader), a pickle of classes this code does not have (ImportError, AttributeError)
        if user_file:
            raise CheckpointError(f"{path}: not a {what} saved by torch.save (a truncated or corrupt file, or "
                                  f"another kind of file: {first_line(e)})") from None
        raise CheckpointError(f"{path}: not a readable {what}; the file is truncated or corrupt ({first_line(e)}); "
                              "delete it to compute it again") from None
    saved_config = ckpt.get("config") if isinstance(ckpt, dict) else None
    differing = [] if config is None else [k for k in _differing_keys(config, saved_config or {}) if k not in ignore]
    if differing:
        keys = ", ".join(differing)
        raise CheckpointError(f"{path}: a {what} of another config (differs in {keys}); "
                              "remove it to start this run again")
    saved = ckpt.get("results_version", results_version) if isinstance(ckpt, dict) else results_version
    if results_version is not None and saved != results_version:
        raise CheckpointError(f"{path}: a {what} of results version {saved}, but this code is results version "
                              f"{results_version}; remove it to start again")
    return ckpt


def first_line(e: BaseException) -> str:
    """An exception's message in one line (its type when it has none)."""
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__


def _differing_keys(a: dict, b: dict, prefix: str = "") -> list[str]:
    """The dotted keys whose values differ between two nested dicts ("train.lr")."""
    keys, missing = [], object()
    for k in sorted({*a, *b}, key=str):
        x, y = a.get(k, missing), b.get(k, missing)
        keys += _differing_keys(x, y, f"{prefix}{k}.") if isinstance(x, dict) and isinstance(y, dict) else \
            [f"{prefix}{k}"] if x != y else []
    return keys


def artifacts_dir() -> Path:
    """Root of every cache (BPE models, checkpoints, parses): `settings().artifacts`."""
    return settings().artifacts
