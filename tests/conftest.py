"""Shared fixtures.

Every test runs with HEADLIB_ARTIFACTS pointing at a session temp dir, so nothing is written
to the repository's artifacts/. Torch uses one thread (and subprocesses get OMP_NUM_THREADS=1):
fast and deterministic on a small, shared machine.
"""
from __future__ import annotations

import random
import subprocess
import sys

import pytest
import torch


@pytest.fixture(scope="session", autouse=True)
def artifacts_tmp(tmp_path_factory):
    path = tmp_path_factory.mktemp("artifacts")
    mp = pytest.MonkeyPatch()
    mp.setenv("HEADLIB_ARTIFACTS", str(path))
    mp.setenv("OMP_NUM_THREADS", "1")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    from headlib.files import artifacts_dir
    assert artifacts_dir() == path.resolve()
    yield path
    torch.set_num_threads(threads)
    mp.undo()


def tiny_model_config(**kw):
    from headlib.config import ModelConfig
    args = dict(d_model=32, n_heads=4, d_ff=64, enc_layers=2, dec_layers=2, dropout=0.0, norm="pre")
    args.update(kw)
    return ModelConfig(**args)


def reverse_batch(rng: random.Random, n: int, vocab: int, max_len: int = 7):
    """A batch of the toy task 'output the source reversed' (ids >= 4: no specials)."""
    from headlib.data.batching import Encoded
    src = [[rng.randrange(4, vocab) for _ in range(rng.randint(1, max_len))] for _ in range(n)]
    return Encoded(src, [s[::-1] for s in src])


@pytest.fixture(scope="session")
def trained_tiny():
    """A tiny Transformer (vocab 12) trained for a few seconds to reverse its input: its outputs
    are non-trivial and of varied lengths, so decoding tests compare real choices."""
    from headlib.data.batching import collate
    from headlib.nn.model import Transformer
    from headlib.nn.loss import token_loss
    torch.manual_seed(0)
    rng = random.Random(0)
    vocab = 12
    model = Transformer(tiny_model_config(), vocab)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3, betas=(0.9, 0.98))
    model.train()
    for _ in range(200):
        data = reverse_batch(rng, 32, vocab)
        src, tgt_in, tgt_out = collate(data, list(range(len(data))))
        loss, n = token_loss(model, src, tgt_in, tgt_out, 0.0)
        opt.zero_grad()
        (loss / n).backward()
        opt.step()
    model.eval()
    return model


def run_cli(*args, check=True, stdin=None, timeout=600):
    """`python -m headlib ARGS` in a subprocess with the test environment."""
    from headlib.settings import settings
    proc = subprocess.run([sys.executable, "-m", "headlib", *args], cwd=settings().root, input=stdin,
                          capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"headlib {' '.join(args)} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    return proc


SMOKE_CLI_SET = ("--set", "train.threads=1")


@pytest.fixture(scope="session")
def smoke_run(artifacts_tmp):
    """One smoke-profile run trained through the CLI: its run dir (with final.pt, results.json)."""
    from headlib.config import get_config
    from headlib.train import run_dir
    run_cli("train", "--profile", "smoke", *SMOKE_CLI_SET, "--quiet")
    cfg = get_config("smoke", [SMOKE_CLI_SET[1]])
    out = run_dir(cfg)
    assert (out / "results.json").is_file(), list(out.parent.iterdir())
    return cfg, out
