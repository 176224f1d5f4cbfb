"""The paired bootstrap (sacreBLEU's) against a slow resampling written out here."""
import json
import random

import numpy as np
import pytest
from sacrebleu.metrics import BLEU

from headlib.nn.decode import paired_bootstrap

WORDS = "a man in a blue shirt is riding a bike down the street while two dogs run beside him".split()


def corpus(n=120, seed=0):
    rng = random.Random(seed)
    refs = [" ".join(rng.choices(WORDS, k=rng.randint(5, 12))) for _ in range(n)]
    def noisy(p):   # each word replaced with probability p
        return [" ".join(w if rng.random() > p else rng.choice(WORDS) for w in r.split()) for r in refs]
    return refs, noisy


def test_the_interval_is_a_bootstrap_of_the_baseline_and_a_worse_system_falls_outside():
    refs, noisy = corpus()
    baseline, close, worse = noisy(0.2), noisy(0.2), noisy(0.6)
    same = paired_bootstrap(baseline, baseline, refs)
    assert same["within"] and same["system_bleu"] == same["baseline_bleu"]
    result = paired_bootstrap(baseline, worse, refs)
    assert not result["within"] and result["p_value"] < 0.01 and result["system_bleu"] < result["baseline_bleu"]
    assert paired_bootstrap(baseline, close, refs)["within"]
    assert json.loads(json.dumps(result)) == result   # plain Python values: results are written as JSON

    # the interval, by a slow bootstrap of the same corpus: resample sentences, rescore, 95% of the spread
    rng, bleu = np.random.default_rng(1), BLEU()
    scores = []
    for _ in range(300):
        idx = rng.integers(0, len(refs), len(refs))
        scores.append(bleu.corpus_score([baseline[i] for i in idx], [[refs[i] for i in idx]]).score)
    lo, hi = np.percentile(scores, [2.5, 97.5])
    assert same["baseline_mean"] == pytest.approx(np.mean(scores), abs=0.5)
    assert same["baseline_ci"] == pytest.approx((hi - lo) / 2, rel=0.25)


def test_unequal_lengths_are_one_clear_error():
    with pytest.raises(ValueError, match="3 baseline, 2 system hypotheses and 3 references"):
        paired_bootstrap(["a"] * 3, ["a"] * 2, ["a"] * 3)


def test_the_difference_interval_is_the_paired_resampling_written_out():
    """`bleu_difference` against corpus BLEU recomputed on each resample (same indices for both
    systems), and a system against itself: a difference of 0 with a zero-width interval."""
    from headlib.nn.decode import bleu_difference
    refs, noisy = corpus(80)
    better, worse = noisy(0.1), noisy(0.4)
    d = bleu_difference(better, worse, refs, samples=200)
    bleu = BLEU()
    idx = np.random.default_rng(12345).choice(len(refs), size=(200, len(refs)), replace=True)
    slow = [bleu.corpus_score([better[j] for j in i], [[refs[j] for j in i]]).score
            - bleu.corpus_score([worse[j] for j in i], [[refs[j] for j in i]]).score for i in idx]
    low, high = np.percentile(slow, [2.5, 97.5])
    assert (d["low"], d["high"]) == (round(float(low), 2), round(float(high), 2))
    assert d["difference"] == round(bleu.corpus_score(better, [refs]).score - bleu.corpus_score(worse, [refs]).score, 2)
    assert 0 < d["low"] < d["difference"] < d["high"]
    same = bleu_difference(better, better, refs, samples=50)
    assert (same["difference"], same["low"], same["high"]) == (0.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="bleu_difference: 80 system, 79 baseline"):
        bleu_difference(better, worse[:-1], refs)
