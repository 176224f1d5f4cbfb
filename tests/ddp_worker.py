"""Worker for tests/test_ddp.py, run under `torchrun --nproc_per_node=2`.

    python tests/ddp_worker.py OUT_DIR KEY=VALUE...

Trains the smoke profile with the given overrides in OUT_DIR/run and saves this rank's final
parameters (and the number of updates) to OUT_DIR/rank{RANK}.pt.
"""
import os
import sys
from pathlib import Path

import torch

from headlib.config import get_config
from headlib.train import Trainer


def main():
    out, overrides = Path(sys.argv[1]), sys.argv[2:]
    torch.set_num_threads(1)
    cfg = get_config("smoke", overrides)
    trainer = Trainer(cfg, out / "run", progress=False)
    assert trainer.world == int(os.environ["WORLD_SIZE"]) == 2, trainer.world
    state = trainer.fit()
    params = {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}
    torch.save({"params": params, "step": state["step"], "rank": trainer.rank,
                "world": trainer.world}, out / f"rank{trainer.rank}.pt")
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
