"""Data-parallel training (torchrun, 2 processes, gloo) computes the same updates as one process
with gradient accumulation over the same micro-batches."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from headlib.config import get_config
from headlib.train import Trainer
from headlib.train.trainer import lr_at

HERE = Path(__file__).resolve().parent
STEPS = 3
COMMON = ["model.dropout=0", "train.threads=1", "train.bf16=false", f"train.max_steps={STEPS}",
          "train.eval_every=1000"]


def _torchrun_cmd():
    exe = shutil.which("torchrun", path=str(Path(sys.executable).parent))
    return [exe] if exe else [sys.executable, "-m", "torch.distributed.run"]


def _launch(out: Path):
    env = dict(os.environ, OMP_NUM_THREADS="1", MASTER_ADDR="127.0.0.1", GLOO_SOCKET_IFNAME="lo")
    cmd = [*_torchrun_cmd(), "--nproc_per_node=2", "--standalone", str(HERE / "ddp_worker.py"), str(out),
           *COMMON, "train.accum=1"]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)


def _cannot_start(proc) -> bool:
    """torchrun itself could not start (no rendezvous / sockets), as opposed to a failing worker."""
    text = proc.stderr + proc.stdout
    return proc.returncode != 0 and any(s in text for s in (
        "No module named torch.distributed.run", "RendezvousConnectionError", "Address family not supported",
        "Cannot assign requested address", "gloo is not available"))


def _train_single(out: Path, accum: int):
    cfg = get_config("smoke", [*COMMON, f"train.accum={accum}"])
    trainer = Trainer(cfg, out, progress=False)
    trainer.fit()
    assert trainer.world == 1 and trainer.state["step"] == STEPS
    return trainer


def test_ddp_equals_single_process_accumulation(tmp_path):
    single = _train_single(tmp_path / "single", accum=2)   # also caches the BPE for the workers
    proc = _launch(tmp_path)
    if _cannot_start(proc):
        pytest.skip(f"torchrun cannot start on this machine:\n{proc.stderr[-2000:]}")
    assert proc.returncode == 0, proc.stderr[-5000:]

    ranks = [torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in (0, 1)]
    assert [r["rank"] for r in ranks] == [0, 1] and all(r["world"] == 2 and r["step"] == STEPS for r in ranks)
    p0, p1 = ranks[0]["params"], ranks[1]["params"]
    for k in p0:                                           # every rank holds the same model
        assert torch.equal(p0[k], p1[k]), k

    ref = single.model.state_dict()
    # Adam's step is ~lr * sign(gradient) for a gradient that is zero up to rounding: the key
    # projection biases (softmax is invariant to adding the same score to every key).
    lr_sum = sum(lr_at(s, single.cfg) for s in range(1, STEPS + 1))
    for k, v in ref.items():
        if k.endswith("k_proj.bias"):
            assert (p0[k] - v).abs().max() <= 2 * lr_sum, k
        else:
            torch.testing.assert_close(p0[k], v, atol=1e-6, rtol=1e-5, msg=k)

    # the comparison can fail: one process without accumulation sees half the data per update
    other = _train_single(tmp_path / "single-accum1", accum=1).model.state_dict()
    assert max((other[k] - v).abs().max() for k, v in ref.items() if not k.endswith("k_proj.bias")) > 1e-4
