"""Cached greedy and beam search against slow references that recompute the whole prefix."""
import itertools
import random

import pytest
import torch
from conftest import reverse_batch, tiny_model_config

from headlib.data.batching import source_tensor
from headlib.data.bpe import BOS_ID, EOS_ID, PAD_ID
from headlib.nn.decode import beam_search, greedy, max_length, score, translate
from headlib.nn.model import Transformer

NEVER = (PAD_ID, BOS_ID)   # tokens a decoder must not emit


def next_logprobs(model, src_row, prefix, gates=None):
    """log p(. | prefix, x) by a full teacher-forced forward pass (no cache), fp32."""
    tgt_in = torch.tensor([[BOS_ID] + prefix])
    with torch.no_grad():
        return model(src_row, tgt_in, gates=gates)[0, -1].float().log_softmax(-1)


def slow_greedy(model, src, max_len, gates=None):
    """For each sentence alone: re-run the model on the whole prefix, take the best token."""
    outs = []
    for b in range(src.size(0)):
        row = src[b:b + 1, : int(src[b].ne(PAD_ID).sum())]
        prefix = []
        for _ in range(max_len):
            lp = next_logprobs(model, row, prefix, gates)
            lp[list(NEVER)] = float("-inf")
            tok = int(lp.argmax())
            if tok == EOS_ID:
                break
            prefix.append(tok)
        outs.append(prefix)
    return outs


def sources(n=10, seed=1, vocab=12):
    data = reverse_batch(random.Random(seed), n, vocab)
    return data.src, source_tensor(data.src)


def test_greedy_equals_full_recomputation(trained_tiny):
    raw, src = sources()
    assert len({len(s) for s in raw}) >= 4        # different source lengths (padding) in one batch
    max_len = max_length(src, trained_tiny)
    fast = greedy(trained_tiny, src)
    assert fast == slow_greedy(trained_tiny, src, max_len)
    # non-trivial outputs: of several lengths, mostly the task's answer
    assert len({len(h) for h in fast}) >= 4
    assert sum(h == s[::-1] for h, s in zip(fast, raw)) >= len(raw) // 2


def test_greedy_with_gates_equals_full_recomputation(trained_tiny):
    _, src = sources(seed=2)
    gates = {"enc-self": torch.tensor([[1.0, 0.0, 1.0, 0.5], [1.0, 1.0, 0.0, 1.0]]),
             "dec-self": torch.tensor([[0.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 0.3]]),
             "dec-enc": torch.tensor([[1.0, 1.0, 0.0, 1.0], [1.0, 0.0, 1.0, 1.0]])}
    fast = greedy(trained_tiny, src, gates=gates)
    assert fast == slow_greedy(trained_tiny, src, max_length(src, trained_tiny), gates)
    assert fast != greedy(trained_tiny, src)      # the gates changed something


def test_cached_step_logits_equal_full_forward(trained_tiny):
    model = trained_tiny
    _, src = sources(n=6, seed=3)
    g = torch.Generator().manual_seed(0)
    T = 9
    tgt_in = torch.cat([torch.full((src.size(0), 1), BOS_ID), torch.randint(3, 12, (src.size(0), T - 1), generator=g)], 1)
    gates = {"dec-enc": torch.tensor([[1.0, 0.5, 1.0, 1.0], [1.0, 1.0, 1.0, 0.0]])}
    for gt in (None, gates):
        with torch.no_grad():
            full = model(src, tgt_in, gates=gt)                # (B, T, V)
            memory, bias = model.encode(src, gt), model.padding_bias(src)
            cache = [{} for _ in model.decoder]
            for t in range(T):
                step = model.decode_step(tgt_in[:, t:t + 1], memory, bias, cache, t, gt)
                torch.testing.assert_close(step, full[:, t], atol=1e-5, rtol=1e-5)


def test_greedy_is_batch_invariant(trained_tiny):
    _, src = sources(seed=4)
    batch = greedy(trained_tiny, src, max_len=12)
    for b in range(src.size(0)):
        alone = src[b:b + 1, : int(src[b].ne(PAD_ID).sum())]
        assert greedy(trained_tiny, alone, max_len=12) == [batch[b]]


def test_greedy_never_emits_pad_or_bos():
    """A random model whose output bias favours <pad> and <s>: they must still never be chosen."""
    torch.manual_seed(0)
    model = Transformer(tiny_model_config(), 8).eval()
    with torch.no_grad():
        model.out_bias[PAD_ID] = model.out_bias[BOS_ID] = 5.0
    src = torch.randint(4, 8, (4, 5))
    hyps = greedy(model, src, max_len=6)
    # the slow reference masks the two tokens itself; a decoder that emitted <pad> and dropped it
    # from the output (or stopped) would give shorter hypotheses than the reference
    assert hyps == slow_greedy(model, src, 6) and all(len(h) > 0 for h in hyps)
    for hyp in hyps + beam_search(model, src, beam=1, max_len=6):
        assert not set(hyp) & {PAD_ID, BOS_ID, EOS_ID}


# -- beam search ----------------------------------------------------------------------------------

def test_beam_one_equals_greedy(trained_tiny):
    _, src = sources(n=12, seed=5)
    assert beam_search(trained_tiny, src, beam=1) == greedy(trained_tiny, src)


def slow_beam(model, src_row, K, alpha, max_len):
    """The documented algorithm for one sentence, with full recomputation and Python lists:
    rank the top 2K continuations; those ending in EOS within the top K are finished; the best K
    others stay active; stop at K finished; at max_len the active ones finish as they are."""
    beams, finished = [(0.0, [])], []
    for step in range(max_len):
        cands = []
        for s, toks in beams:
            lp = next_logprobs(model, src_row, toks)
            for v in range(lp.numel()):
                if v not in NEVER:
                    cands.append((s + float(lp[v]), toks, v))
        cands = sorted(cands, key=lambda c: -c[0])[:2 * K]
        for s, toks, v in cands[:K]:
            if v == EOS_ID and len(finished) < K:
                finished.append((s / (step + 1) ** alpha, toks))
        beams = [(s, toks + [v]) for s, toks, v in cands if v != EOS_ID][:K]
        if len(finished) >= K:
            break
    else:
        for s, toks in beams:
            finished.append((s / max_len ** alpha, toks))
    return max(finished, key=lambda f: f[0])[1]


@pytest.mark.parametrize("K,alpha", [(2, 1.0), (3, 0.6), (4, 1.4)])
def test_beam_equals_slow_reference(trained_tiny, K, alpha):
    _, src = sources(n=6, seed=6)
    max_len = 10
    fast = beam_search(trained_tiny, src, beam=K, alpha=alpha, max_len=max_len)
    for b in range(src.size(0)):
        row = src[b:b + 1, : int(src[b].ne(PAD_ID).sum())]
        assert fast[b] == slow_beam(trained_tiny, row, K, alpha, max_len), b


def teacher_forced_score(model, src_row, hyp, max_len, alpha):
    """Length-normalised log-probability of an output, as beam search defines it: a finished
    output scores log p(hyp + EOS) / (len + 1)**alpha; one cut at max_len, log p(hyp) / max_len**alpha."""
    ends = len(hyp) < max_len
    seq = hyp + [EOS_ID] if ends else hyp
    tgt_in = torch.tensor([[BOS_ID] + seq[:-1]])
    with torch.no_grad():
        lp = model(src_row, tgt_in)[0].double().log_softmax(-1)
    total = float(sum(lp[t, tok] for t, tok in enumerate(seq)))
    return total / len(seq) ** alpha


@pytest.fixture(scope="module")
def two_word_model():
    """Vocab of 6 (specials, two words): trained for a few steps on 'reverse the input', so that
    its outputs differ by source and greedy is sometimes not the best output."""
    from headlib.data.batching import collate
    from headlib.nn.loss import token_loss
    torch.manual_seed(0)
    rng = random.Random(0)
    model = Transformer(tiny_model_config(), 6)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(10):
        data = reverse_batch(rng, 16, 6, max_len=3)
        src, tgt_in, tgt_out = collate(data, list(range(16)))
        loss, n = token_loss(model, src, tgt_in, tgt_out, 0.0)
        opt.zero_grad()
        (loss / n).backward()
        opt.step()
    return model.eval()


@pytest.mark.parametrize("alpha", [0.6, 1.0])
def test_beam_search_is_exact_when_the_beam_holds_every_prefix(two_word_model, alpha):
    """Tiny vocab (EOS, UNK and two words), max_len 4: every output can be enumerated. A beam wider
    than the number of prefixes must return the best length-normalised output (scored here by
    teacher forcing), and so never score below greedy."""
    model, max_len, K = two_word_model, 4, 128
    src = torch.tensor([[4, 5, 4, EOS_ID], [5, 5, EOS_ID, PAD_ID], [4, EOS_ID, PAD_ID, PAD_ID],
                        [5, 4, 4, EOS_ID], [4, 4, EOS_ID, PAD_ID], [5, EOS_ID, PAD_ID, PAD_ID]])
    words = [t for t in range(6) if t not in NEVER and t != EOS_ID]          # UNK, 4, 5
    space = [list(p) for n in range(max_len + 1) for p in itertools.product(words, repeat=n)]
    assert len(space) == 1 + 3 + 9 + 27 + 81
    beams = beam_search(model, src, beam=K, alpha=alpha, max_len=max_len)
    greedys = greedy(model, src, max_len=max_len)
    gains = []
    for b in range(src.size(0)):
        row = src[b:b + 1, : int(src[b].ne(PAD_ID).sum())]
        scores = {tuple(h): teacher_forced_score(model, row, h, max_len, alpha) for h in space}
        best = max(scores, key=scores.get)
        assert tuple(beams[b]) == best
        assert scores[tuple(beams[b])] >= scores[tuple(greedys[b])]
        gains.append(scores[best] - scores[tuple(greedys[b])])
    # non-trivial: several different outputs, and greedy is beaten at least once
    assert len({tuple(h) for h in beams}) >= 2
    assert max(gains) > 0.01


# -- translate / score ----------------------------------------------------------------------------

def test_score_against_sacrebleu_directly():
    from sacrebleu.metrics import BLEU, CHRF
    hyps = ["a dog runs on the grass .", "two men talk"]
    refs = ["a dog is running on the grass .", "two men are talking"]
    s = score(hyps, refs)
    assert s["bleu"] == round(BLEU().corpus_score(hyps, [refs]).score, 2)
    assert s["chrf"] == round(CHRF().corpus_score(hyps, [refs]).score, 2)
    assert s["bleu_signature"].startswith("nrefs:1|case:mixed") and "tok:13a" in s["bleu_signature"]
    assert score(refs, refs)["bleu"] == 100.0
    with pytest.raises(ValueError):
        score(hyps, refs[:1])


class _Pieces:
    """A stand-in BPE: one id per character 'a'..'h' (ids 4..11)."""
    def encode_batch(self, texts):
        return [[4 + "abcdefgh".index(c) for c in t] for t in texts]

    def decode(self, ids):
        return "".join("abcdefgh"[i - 4] for i in ids if i >= 4)


def test_translate_keeps_input_order_across_batches(trained_tiny):
    rng = random.Random(8)
    sents = ["".join(rng.choice("abcdefgh") for _ in range(rng.randint(1, 7))) for _ in range(20)]
    bpe = _Pieces()
    for beam in (1, 2):
        out = translate(trained_tiny, bpe, sents, beam=beam, max_tokens=30)   # many small batches
        ids = source_tensor(bpe.encode_batch(sents))
        direct = greedy(trained_tiny, ids) if beam == 1 else beam_search(trained_tiny, ids, beam=2)
        assert out == [bpe.decode(h) for h in direct]
