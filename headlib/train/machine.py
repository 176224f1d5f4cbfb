"""Where a run computes: the device, and what decides its rounding and speed besides its config
(recorded in every run's results, since fp32 training is bitwise the same only on CPUs of one kind)."""
from __future__ import annotations

import functools
import os
from pathlib import Path

import torch


def device() -> torch.device:
    return torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if torch.cuda.is_available() else torch.device("cpu")


def machine() -> dict:
    """What decides a run's rounding and speed besides its config: torch, the device, on CPU the
    vector ISA and the bf16 matrix instructions (oneDNN uses AMX where the CPU has it, else
    AVX512-BF16), and the thread count."""
    dev = device()
    if dev.type == "cuda":
        return {"torch": torch.__version__, "device": torch.cuda.get_device_name(dev)}
    return {"torch": torch.__version__, "device": "cpu", "isa": torch.backends.cpu.get_cpu_capability(),
            "bf16": cpu_bf16(), "threads": torch.get_num_threads()}


@functools.cache
def cpu_bf16() -> str:
    """The CPU's bf16 matrix instructions: "amx_bf16", "avx512_bf16" or "none"."""
    try:
        flags = set(Path("/proc/cpuinfo").read_text().split())
    except OSError:
        flags = set()
    return "amx_bf16" if "amx_bf16" in flags else "avx512_bf16" if "avx512_bf16" in flags else "none"
