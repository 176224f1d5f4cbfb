"""The head-mask format, in one place: a fixed 0/1 mask per attention kind, 1 = keep.

As text (`ModelConfig.head_mask`, a run's config, a pruning record's "mask"), one part per kind,
one 0/1 string per layer, layers separated by "/":

    "enc-self:11000000/01000000/.../00000001,dec-enc:..."

As tensors, {kind: (layers, heads) float}, the model's `head_mask(kind)` buffers. Kinds a spec
does not name are all on; `canonical` drops the kinds whose heads are all on, so that two specs of
the same model compare equal.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


def spec_rows(spec: str, layers: dict[str, int], n_heads: int) -> dict[str, list[str]]:
    """A spec as its 0/1 rows per kind, checked against the architecture (`layers`: layers of each
    kind, `ModelConfig.layer_counts`); kinds not named are left out. A malformed spec is one
    ValueError that names `model.head_mask` and what is wrong."""
    masks = {}
    for part in filter(None, spec.split(",")):
        kind, _, rows = part.partition(":")
        rows = rows.split("/")
        if kind not in layers:
            raise ValueError(f"model.head_mask: unknown attention kind {kind!r}; valid: {', '.join(layers)}")
        if len(rows) != layers[kind] or any(len(r) != n_heads or set(r) - {"0", "1"} for r in rows):
            raise ValueError(f"model.head_mask: {kind} needs {layers[kind]} layers of {n_heads} "
                             f"0/1 digits separated by '/', got {part!r}")
        masks[kind] = rows
    return masks


def parse_spec(spec: str, layers: dict[str, int], n_heads: int) -> dict[str, torch.Tensor]:
    """A spec as {kind: (layers, heads) 0/1 float tensor}, checked as `spec_rows` checks it."""
    import torch   # here, not at the top: the config validates specs without loading torch
    return {kind: torch.tensor([[float(c) for c in r] for r in rows])
            for kind, rows in spec_rows(spec, layers, n_heads).items()}


def to_spec(masks: dict[str, torch.Tensor]) -> str:
    """{kind: (layers, heads) 0/1 tensor} as a spec (the inverse of `parse_spec`)."""
    return ",".join(f"{kind}:" + "/".join("".join(str(int(v)) for v in row) for row in m.tolist())
                    for kind, m in masks.items())


def canonical(spec: str) -> str:
    """`spec` without the kinds whose heads are all on (the same model, so the same run)."""
    return ",".join(part for part in spec.split(",") if "0" in part.partition(":")[2])


def kind_mask(spec: str, kind: str) -> torch.Tensor:
    """The (layers, heads) 0/1 mask of `kind` in `spec`, its shape read from the spec itself."""
    part = next((p for p in spec.split(",") if p.startswith(kind + ":")), None)
    if part is None:
        raise ValueError(f"head mask {spec!r} has no part for {kind}")
    rows = part.partition(":")[2].split("/")
    return parse_spec(part, {kind: len(rows)}, len(rows[0]))[kind]
