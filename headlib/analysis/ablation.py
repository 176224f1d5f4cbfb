"""Single-head ablation and attention pattern types (Kovaleva et al. 2019, "Revealing the Dark
Secrets of BERT"), on an NMT model's three attention kinds.

Ablation: the model with exactly one head disabled (its gate set to 0, every other head as it
was), scored by greedy BLEU; a head whose removal raises BLEU "helps when removed".

Pattern types: Kovaleva et al. annotated 400 maps by hand and trained a classifier; we use a
written rule on three numbers of a map A (Tq, Tk), each a mean over queries:
- diagonal mass d: weight on keys within one position of the query's aligned position
  j* = round(i (Tk - 1) / (Tq - 1)) (the query itself in self-attention);
- vertical mass v: weight off that diagonal band on the two keys that get the most of it
  (e.g. EOS, a period);
- locality b: weight within three positions of j*, minus what uniform attention would put there.
With threshold theta (0.5): diagonal if d >= theta and v < theta/2; vertical if v >= theta and
d < theta/2; vertical+diagonal if both >= theta/2; block (a local window wider than the diagonal)
if b >= theta/2; otherwise heterogeneous. A head's type is its most frequent type over sentences.
"""
from __future__ import annotations

from collections import Counter

import pandas as pd
import torch

from headlib.analysis.importance import bleu_without_retraining
from headlib.data.batching import source_tensor
from headlib.data.bpe import BOS_ID
from headlib.data.corpora import Corpus


def single_head_masks(model, kind: str) -> list[tuple[str, torch.Tensor]]:
    """(label "layer.head", mask) for every head of `kind`: the model's mask with that head off."""
    base = model.head_mask(kind)
    out = []
    for layer in range(base.size(0)):
        for head in range(base.size(1)):
            m = base.clone()
            m[layer, head] = 0.0
            out.append((f"{layer + 1}.{head + 1}", m))
    return out


def single_head_ablation(model, bpe, corpus: Corpus, kinds=("enc-self", "dec-self", "dec-enc")) -> pd.DataFrame:
    """One row per head: kind, layer, head (1-based), greedy BLEU without it, and the change
    against the intact model."""
    from headlib.nn.decode import evaluate_bleu
    full = evaluate_bleu(model, bpe, corpus)["bleu"]
    rows = []
    for kind in kinds:
        for r in bleu_without_retraining(model, bpe, corpus, single_head_masks(model, kind), kind):
            layer, head = map(int, r["method"].split("."))
            rows.append({"kind": kind, "layer": layer, "head": head, "BLEU": r["BLEU"], "change": r["BLEU"] - full})
    table = pd.DataFrame(rows)
    table.attrs["full"] = full
    return table


def masses(a: torch.Tensor, near: int = 1, band: int = 3, top: int = 2) -> dict[str, float]:
    """Diagonal mass, vertical mass and locality of one map (Tq, Tk) (see the module docstring)."""
    tq, tk = a.shape
    aligned = torch.round(torch.arange(tq, dtype=torch.float64) * (tk - 1) / max(tq - 1, 1))
    offset = (torch.arange(tk)[None, :] - aligned[:, None]).abs()             # (Tq, Tk)
    off_diagonal = a * (offset > near)
    cols = off_diagonal.sum(0).topk(min(top, tk)).indices
    local = offset <= band
    return {"diagonal": float((a * (offset <= near)).sum(1).mean()),
            "vertical": float(off_diagonal[:, cols].sum(1).mean()),
            "locality": float((a * local).sum(1).mean() - local.sum(1).double().mean() / tk)}


def pattern_type(a: torch.Tensor, theta: float = 0.5) -> str:
    m = masses(a)
    d, v = m["diagonal"], m["vertical"]
    if d >= theta and v < theta / 2:
        return "diagonal"
    if v >= theta and d < theta / 2:
        return "vertical"
    if d >= theta / 2 and v >= theta / 2:
        return "vertical+diagonal"
    if m["locality"] >= theta / 2:
        return "block"
    return "heterogeneous"


@torch.no_grad()
def teacher_forced_attention(model, bpe, corpus: Corpus, n: int = 200) -> list[dict[str, torch.Tensor]]:
    """Attention maps of the first `n` pairs, teacher-forced on the reference: per sentence
    {kind: (layers, heads, Tq, Tk)} without padding (EOS included)."""
    model.eval()
    maps = []
    for src_text, tgt_text in list(zip(corpus.src, corpus.tgt))[:n]:
        s, t = bpe.encode_batch([src_text])[0], bpe.encode_targets([tgt_text])[0]
        src = source_tensor([s])
        tgt_in = torch.tensor([[BOS_ID] + t])
        _, w = model(src, tgt_in, return_attention=True)
        maps.append({k: v[:, 0].float() for k, v in w.items()})
    return maps


def head_types(maps: list[dict[str, torch.Tensor]], theta: float = 0.5) -> pd.DataFrame:
    """One row per (kind, layer, head): its most frequent pattern type, the share of sentences of
    that type, and the mean masses."""
    rows = []
    for kind in maps[0]:
        L, H = maps[0][kind].shape[:2]
        for l in range(L):
            for h in range(H):
                types = Counter(pattern_type(m[kind][l, h], theta) for m in maps)
                mass = pd.DataFrame([masses(m[kind][l, h]) for m in maps]).mean()
                top, count = types.most_common(1)[0]
                rows.append({"kind": kind, "layer": l + 1, "head": h + 1, "type": top,
                             "share": count / len(maps), **mass.to_dict()})
    return pd.DataFrame(rows)


def change_by_type(ablation: pd.DataFrame) -> pd.DataFrame:
    """The mean BLEU change of removing a head, by pattern type (rows) and attention kind (columns),
    as text "mean (n heads)", empty where a kind has no head of that type. `ablation`: one row per
    head with "kind", "type" and "change" (`single_head_ablation` merged with `head_types`)."""
    mean = ablation.pivot_table(index="type", columns="kind", values="change", aggfunc="mean")    # (types, kinds)
    count = ablation.pivot_table(index="type", columns="kind", values="change", aggfunc="size")   # (types, kinds)
    table = mean.round(2).astype(str) + " (" + count.fillna(0).astype(int).astype(str) + " heads)"
    return table.where(count.notna(), "")
