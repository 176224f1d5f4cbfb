"""Batched greedy and beam search over the key/value cache; sacreBLEU and chrF.

BLEU is always computed by sacrebleu on detokenized output against raw references, and the
sacrebleu signature is stored beside every score.
"""
from __future__ import annotations

import numpy as np
import torch
from sacrebleu.metrics import BLEU, CHRF

from headlib.data.batching import source_tensor
from headlib.data.bpe import BOS_ID, EOS_ID, PAD_ID

NEG_INF = float("-inf")


def max_length(src: torch.Tensor, model) -> int:
    """Longest output allowed for a batch: 1.5 x the longest source + 10, within the positions."""
    return min(int(src.ne(PAD_ID).sum(1).max()) * 3 // 2 + 10, model.cfg.max_positions)


@torch.no_grad()
def greedy(model, src: torch.Tensor, gates=None, max_len: int | None = None) -> list[list[int]]:
    """src (B, S) -> the greedy output ids of each sentence (without EOS)."""
    max_len = max_len or max_length(src, model)
    memory, bias = model.encode(src, gates), model.padding_bias(src)
    B = src.size(0)
    cache = [{} for _ in model.decoder]
    token = torch.full((B, 1), BOS_ID, dtype=torch.long, device=src.device)
    done = torch.zeros(B, dtype=torch.bool, device=src.device)
    out = []
    for step in range(max_len):
        logits = model.decode_step(token, memory, bias, cache, step, gates)
        logits[:, PAD_ID] = logits[:, BOS_ID] = NEG_INF  # never emitted (as in beam_search)
        nxt = logits.argmax(-1)  # (B,)
        nxt = nxt.masked_fill(done, PAD_ID)
        out.append(nxt)
        done |= nxt.eq(EOS_ID)
        if done.all():
            break
        token = nxt[:, None]
    return [_strip(row) for row in torch.stack(out, 1).tolist()]


def _strip(ids: list[int]) -> list[int]:
    return ids[:ids.index(EOS_ID)] if EOS_ID in ids else [i for i in ids if i != PAD_ID]


@torch.no_grad()
def beam_search(model, src: torch.Tensor, beam: int = 4, alpha: float = 1.0, gates=None,
                max_len: int | None = None) -> list[list[int]]:
    """src (B, S) -> the best hypothesis of each sentence by log p / len**alpha.

    At each step the top 2K continuations are ranked; those ending in EOS within the top K
    are finished, the best K others stay active (as in fairseq). A sentence is done when it
    has K finished hypotheses; at `max_len` the active ones are finished as they are.
    """
    max_len = max_len or max_length(src, model)
    B, K = src.size(0), beam
    memory = model.encode(src, gates).repeat_interleave(K, 0)  # (B*K, S, D)
    bias = model.padding_bias(src).repeat_interleave(K, 0)       # (B*K, 1, 1, S)
    cache = [{} for _ in model.decoder]
    scores = torch.zeros(B, K, device=src.device)
    scores[:, 1:] = NEG_INF                                       # start from one live beam
    tokens = torch.full((B * K, 1), BOS_ID, dtype=torch.long, device=src.device)
    finished: list[list[tuple[float, list[int]]]] = [[] for _ in range(B)]
    base = (torch.arange(B, device=src.device) * K)[:, None]     # (B, 1)
    for step in range(max_len):
        logp = model.decode_step(tokens[:, -1:], memory, bias, cache, step, gates).float().log_softmax(-1)
        logp[:, PAD_ID] = logp[:, BOS_ID] = NEG_INF
        V = logp.size(-1)
        cand = (scores.view(-1, 1) + logp).view(B, K * V)
        top_scores, top_idx = cand.topk(2 * K, dim=1)             # (B, 2K)
        top_beam, top_tok = top_idx // V, top_idx % V
        is_eos = top_tok.eq(EOS_ID)
        for b, r in (is_eos[:, :K] & top_scores[:, :K].isfinite()).nonzero().tolist():
            if len(finished[b]) < K:
                hyp = tokens[base[b, 0] + top_beam[b, r], 1:].tolist()
                finished[b].append((top_scores[b, r].item() / (step + 1) ** alpha, hyp))
        # keep the K best candidates that do not end in EOS
        keep = is_eos.int().argsort(dim=1, stable=True)[:, :K]    # (B, K)
        scores = top_scores.gather(1, keep)
        rows = (base + top_beam.gather(1, keep)).view(-1)         # (B*K,)
        tokens = torch.cat([tokens[rows], top_tok.gather(1, keep).view(-1, 1)], dim=1)
        model.reorder_cache(cache, rows)
        if all(len(f) >= K for f in finished):
            break
    for b in range(B):
        if len(finished[b]) < K:  # reached max_len
            for r in range(K):
                if scores[b, r].isfinite():
                    finished[b].append((scores[b, r].item() / max_len ** alpha,
                                        tokens[base[b, 0] + r, 1:].tolist()))
    return [max(f, key=lambda t: t[0])[1] for f in finished]


def length_batches(ids: list[list[int]], beam: int, max_tokens: int) -> list[list[int]]:
    """Indices of sentences batched by source length, each batch under `max_tokens` x beam."""
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    batches, cur = [], []
    for i in order:
        if cur and (len(ids[i]) + 1) * (len(cur) + 1) * max(beam, 1) > max_tokens:
            batches.append(cur); cur = []
        cur.append(i)
    if cur:
        batches.append(cur)
    return batches


@torch.no_grad()
def translate(model, bpe, sentences, beam: int = 1, alpha: float = 1.0, gates=None,
              max_tokens: int = 6000, progress: bool = False) -> list[str]:
    """Detokenized translations of raw sentences, batched by length, in input order."""
    model.eval()
    device = next(model.parameters()).device
    ids = bpe.encode_batch(sentences)
    out: list[str | None] = [None] * len(ids)
    batches = length_batches(ids, beam, max_tokens)
    if progress:
        from tqdm.auto import tqdm
        batches = tqdm(batches, desc=f"decode beam={beam}", leave=False)
    for idx in batches:
        src = source_tensor([ids[i] for i in idx]).to(device)
        hyps = greedy(model, src, gates) if beam <= 1 else beam_search(model, src, beam, alpha, gates)
        for i, h in zip(idx, hyps):
            out[i] = bpe.decode(h)
    return out  # type: ignore[return-value]


def score(hyps: list[str], refs: list[str]) -> dict:
    """Corpus BLEU (cased, 13a) and chrF with their sacrebleu signatures."""
    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} hypotheses but {len(refs)} references")
    bleu, chrf = BLEU(), CHRF()
    b, c = bleu.corpus_score(hyps, [refs]), chrf.corpus_score(hyps, [refs])
    return {"bleu": round(b.score, 2), "chrf": round(c.score, 2), "bp": round(b.bp, 3),
            "n": len(hyps), "bleu_signature": str(bleu.get_signature()),
            "chrf_signature": str(chrf.get_signature())}


def paired_bootstrap(baseline: list[str], system: list[str], refs: list[str], samples: int = 1000) -> dict:
    """sacreBLEU's paired bootstrap resampling (Koehn 2004; sacreBLEU's seed 12345): both corpus
    BLEUs, the baseline's bootstrap mean and 95% half-interval, and the p-value of the system
    against the baseline. `within` says whether the system's BLEU lies in the baseline's interval."""
    from sacrebleu.significance import PairedTest
    if not len(baseline) == len(system) == len(refs):
        raise ValueError(f"paired_bootstrap: {len(baseline)} baseline, {len(system)} system hypotheses and "
                         f"{len(refs)} references")
    test = PairedTest([("baseline", baseline), ("system", system)], {"BLEU": BLEU()}, references=[refs],
                      test_type="bs", n_samples=samples)
    _, scores = test()
    base, other = scores["BLEU"]
    row = {"baseline_bleu": round(float(base.score), 2), "baseline_mean": round(float(base.mean), 2),
           "baseline_ci": round(float(base.ci), 2), "system_bleu": round(float(other.score), 2),
           "p_value": round(float(other.p_value), 4), "samples": samples}   # plain floats: numpy's don't serialize
    return row | {"within": bool(abs(row["system_bleu"] - row["baseline_mean"]) <= row["baseline_ci"])}


def bleu_difference(system: list[str], baseline: list[str], refs: list[str], samples: int = 1000,
                    seed: int = 12345) -> dict:
    """BLEU(system) - BLEU(baseline) on the same sentences with its 95% paired bootstrap interval
    (Koehn 2004): `samples` resamplings of the sentences, the same indices for both systems (drawn
    as sacreBLEU draws them, its seed 12345), each system's corpus BLEU from its sentences'
    sacreBLEU statistics; the interval is the 2.5th to 97.5th percentile of the differences."""
    if not len(baseline) == len(system) == len(refs) > 0:
        raise ValueError(f"bleu_difference: {len(system)} system, {len(baseline)} baseline hypotheses and "
                         f"{len(refs)} references")
    bleu = BLEU()
    stats = [np.array(bleu._extract_corpus_statistics(h, [refs]), dtype=np.int64) for h in (system, baseline)]
    idx = np.random.default_rng(seed).choice(len(refs), size=(samples, len(refs)), replace=True)
    scores = [[bleu._compute_score_from_stats(s[i].sum(0).tolist()).score for i in idx] for s in stats]
    diffs = np.array(scores[0]) - np.array(scores[1])                          # (samples,)
    full = [bleu._compute_score_from_stats(s.sum(0).tolist()).score for s in stats]
    low, high = np.percentile(diffs, [2.5, 97.5])
    return {"system_bleu": round(full[0], 2), "baseline_bleu": round(full[1], 2),
            "difference": round(full[0] - full[1], 2), "low": round(float(low), 2), "high": round(float(high), 2),
            "samples": samples}


def evaluate_bleu(model, bpe, corpus, beam: int = 1, alpha: float = 1.0, gates=None) -> dict:
    hyps = translate(model, bpe, corpus.src, beam=beam, alpha=alpha, gates=gates)
    return score(hyps, list(corpus.tgt)) | {"beam": beam, "len_alpha": alpha}
