"""Atomic writes: write to a temporary file beside the target, then rename.

A crash leaves either the old file or the new one, never half of one (as fairseq does for
checkpoints).
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Callable


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


def artifacts_dir() -> Path:
    """Root of every cache (BPE models, checkpoints, parses): $HEADLIB_ARTIFACTS or ./artifacts."""
    return Path(os.environ.get("HEADLIB_ARTIFACTS", "artifacts")).resolve()
