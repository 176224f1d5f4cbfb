"""Attention rollout (Abnar and Zuidema 2020; the global view of Pascual et al. 2021, "Telling
BERT's Full Story"): how much each source token reaches the translation through all layers,
compared with the local view of one attention layer and with LRP input relevance.

Encoder rollout: A_l' = r I + (1 - r) mean_h A_l (the residual connection as a share r = 1/2),
R = A_L' ... A_1' (S, S): row i says how much encoder output i is made of each input token.
Source attribution of a translation: C (T, S) the decoder-encoder attention averaged over heads
and layers (teacher forced on the model's own greedy translation); local = sum_t C[t];
global = sum_t (C R)[t]. LRP: the conservative rule's relevance of each source input vector for
the sum of the top-1 logits (`lrp.source_relevance_batch`). EOS is left out of the comparison.
"""
from __future__ import annotations

import pandas as pd
import torch
from scipy.stats import spearmanr

from headlib.analysis.lrp import own_translations, source_relevance_batch
from headlib.data.batching import source_tensor


def rollout(maps: torch.Tensor, residual: float = 0.5) -> torch.Tensor:
    """maps (L, H, S, S) of one sentence -> (S, S) rollout through the L layers."""
    S = maps.size(-1)
    eye = torch.eye(S, dtype=maps.dtype)
    out = eye
    for layer in maps:
        out = (residual * eye + (1 - residual) * layer.mean(0)) @ out
    return out


@torch.no_grad()
def _attention(model, src, tgt_in):
    _, w = model(src, tgt_in, return_attention=True)
    return w["enc-self"].float(), w["dec-enc"].float()    # (L, B, H, S, S), (L, B, H, T, S)


def source_attributions(model, bpe, sentences, residual: float = 0.5) -> pd.DataFrame:
    """One row per sentence: Spearman rho between LRP input relevance and the local and global
    (rollout) attention attributions of its source tokens, and between local and global."""
    model.eval()
    rows = []
    for text in sentences:
        src = source_tensor(bpe.encode_batch([text]))
        tgt_in, tgt_out = own_translations(model, src)
        lrp = source_relevance_batch(model, src, tgt_in, tgt_out)[0]           # (S,)
        enc, cross = _attention(model, src, tgt_in)
        c = cross[:, 0, :, :tgt_out.size(1)].mean(dim=(0, 1))                 # (T, S)
        local = c.sum(0)
        global_ = (c @ rollout(enc[:, 0], residual)).sum(0)
        n = src.size(1) - 1                                                   # without EOS
        if n < 3:
            continue
        rho = lambda a, b: float(spearmanr(a[:n].numpy(), b[:n].numpy()).statistic)
        rows.append({"tokens": n, "LRP vs local": rho(lrp, local), "LRP vs rollout": rho(lrp, global_),
                     "local vs rollout": rho(local, global_)})
    return pd.DataFrame(rows)
