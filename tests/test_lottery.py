"""Lottery-ticket head pruning: rewinding restores the whole training state (keeping every head
resumes the baseline run bitwise), the ticket keeps the k most confident heads, and a finished
point is read back."""
import json

import pytest
import torch

from headlib.config import get_config
from headlib.files import artifacts_dir, write_json
from headlib.data.corpora import load_split
from headlib.nn.decode import bleu_difference, score
from headlib.pruning.lottery import LotteryConfig, comparison, point_name, run
from headlib.train import run_dir

FRACTIONS = dict(prune_fraction=0.5, rewind_fraction=0.2)  # smoke: 30 updates -> prune at 15, rewind to 6


def _weights(path):
    return torch.load(path, map_location="cpu", weights_only=False)["model"]


def test_keeping_every_head_resumes_the_baseline_run_bitwise():
    """With k = all 8 encoder heads the ticket is the baseline run, rewound to update 6 and
    continued: its final training weights equal the uninterrupted baseline's exactly."""
    row = run("smoke", "en-de", 1, LotteryConfig(k=8, **FRACTIONS))
    assert (row["prune_at"], row["rewind_to"], row["baseline_updates"]) == (15, 6, 30)
    assert row["retained"] == {"enc-self": 8} and row["ticket_updates"] == 24 and row["total_updates"] == 39
    base = _weights(run_dir(get_config("smoke", ["train.seed=1"])) / "last.pt")
    ticket = _weights(artifacts_dir() / row["ticket_run"] / "last.pt")
    assert base.keys() == ticket.keys()
    assert all(torch.equal(base[k], ticket[k]) for k in base)


def test_ticket_keeps_the_most_confident_heads_and_is_read_back(monkeypatch, tmp_path):
    monkeypatch.setenv("HEADLIB_ARTIFACTS", str(tmp_path))  # its made-up sweep point stays here
    cfg = LotteryConfig(k=3, **FRACTIONS)
    row = run("smoke", "en-de", 1, cfg)
    conf = torch.tensor(row["confidence_at_prune"])                      # (layers, heads)
    mask = torch.tensor([[float(c) for c in r] for r in row["mask"].partition(":")[2].split("/")])
    assert int(mask.sum()) == 3 == row["retained"]["enc-self"]
    assert conf[mask.bool()].min() >= conf[~mask.bool()].max()
    final = _weights(artifacts_dir() / row["ticket_run"] / "final.pt")
    assert torch.equal(final["head_mask_enc_self"], mask)
    assert set(row["speed"]["encode_seconds"]) >= {"unpruned", "lottery"}
    # read back while the baseline is the same model: nothing retrains
    monkeypatch.setattr("headlib.pruning.lottery.finalize", lambda *a: pytest.fail("recomputed a cached point"))
    assert run("smoke", "en-de", 1, cfg)["mask"] == row["mask"]
    path = artifacts_dir() / "results/smoke/en-de/seed1/lottery" / point_name(cfg, 30)
    assert json.loads(path.read_text())["model"] == row["model"]
    # a Hard Concrete point of the same model appears: only the speed is measured again, with it
    hc = {"lam": 0.01, "kinds": ["enc-self"], "retained": {"enc-self": 4}, "model": row["model"],
          "mask": "enc-self:1100/0011"}
    write_json(path.parent.parent / "pruning" / "enc-self-lam0.01-s10.json", hc)
    again = run("smoke", "en-de", 1, cfg)
    assert again["speed"]["hard_concrete_lam"] == 0.01 and "Hard Concrete" in again["speed"]["encode_seconds"]
    assert json.loads(path.read_text())["speed"] == again["speed"] and again["test_beam"] == row["test_beam"]
    # the kept translations are those the record's beam BLEU scored; a record without them gets them back
    assert score(row["test_hypotheses"], list(load_split("en-de", row["test_set"]).tgt))["bleu"] == row["test_beam"]
    write_json(path, {k: v for k, v in again.items() if k != "test_hypotheses"})
    assert run("smoke", "en-de", 1, cfg)["test_hypotheses"] == row["test_hypotheses"]
    assert json.loads(path.read_text())["test_hypotheses"] == row["test_hypotheses"]


def test_fractions_must_leave_the_rewind_before_the_prune():
    with pytest.raises(ValueError, match="rewind_fraction"):
        LotteryConfig(prune_fraction=0.2, rewind_fraction=0.3).updates(100)


def test_comparison_reads_costs_and_speed_from_each_point():
    row = {"speed": {"encode_seconds": {"unpruned": 2.0, "lottery": 1.6, "Hard Concrete": 1.25}},
           "test_set": "t", "confidence_at_prune": [[0.5] * 4] * 2, "retained": {"enc-self": 3},
           "total_updates": 39, "test_beam": 20.0}
    baseline = {"steps": 30, "test": {"t": {"beam": {"bleu": 21.0}}}}
    hc = {"lam": 0.01, "retained": {"enc-self": 2}, "prune_config": {"steps": 5}, "test_beam": 20.5}
    t = comparison(row, baseline, hc, {"steps": 30, "test_beam": 19.0}).set_index("method")
    costs = ["encoder heads", "updates", "BLEU", "encoder speed-up"]
    assert t.loc["unpruned", costs].tolist() == [8, 30, 21.0, 1.0]
    assert t.loc["lottery ticket", costs].tolist() == [3, 39, 20.0, 1.25]
    assert t.loc["Hard Concrete (lambda 0.01)", costs].tolist() == [2, 35, 20.5, 1.6]
    assert t.loc["from scratch, Hard Concrete's mask", costs].tolist() == [2, 30, 19.0, 1.6]
    assert t["vs. unpruned"].tolist() == [0.0, -1.0, -0.5, -2.0]
    assert t[["vs. unpruned low", "vs. unpruned high"]].isna().all().all()   # no translations kept
    assert comparison(row, baseline, None, None)["method"].tolist() == ["unpruned", "lottery ticket"]
    on_path = {"lam": 0.01, "retained": {"enc-self": 2}, "path_updates": 12, "test_beam": 20.5}   # a continuation path's point
    assert comparison(row, baseline, on_path, None).set_index("method").loc["Hard Concrete (lambda 0.01)", "updates"] == 42


def test_comparison_intervals_resample_the_kept_translations():
    """Each interval is the paired bootstrap of that model's translations against the unpruned
    model's: [0, 0] for the unpruned model itself, NaN for a model whose translations were not
    kept, and for the ticket the interval `bleu_difference` gives on the same three lists."""
    refs = [f"the cat number {i} sat on the mat ." for i in range(30)]
    full = {"test_hypotheses": refs}
    worse = [r if i % 3 else "a dog" for i, r in enumerate(refs)]
    row = {"speed": {"encode_seconds": {"unpruned": 2.0, "lottery": 1.0}}, "test_set": "t",
           "confidence_at_prune": [[0.5] * 4] * 2, "retained": {"enc-self": 3}, "total_updates": 39,
           "test_beam": 60.0, "test_hypotheses": worse}
    hc = {"lam": 0.01, "retained": {"enc-self": 2}, "prune_config": {"steps": 5}, "test_beam": 70.0}
    baseline = {"steps": 30, "test": {"t": {"beam": {"bleu": 100.0}}}}
    t = comparison(row, baseline, hc, None, full, refs).set_index("method")
    assert t.loc["unpruned", ["vs. unpruned low", "vs. unpruned high"]].tolist() == [0.0, 0.0]
    assert t.loc["Hard Concrete (lambda 0.01)", ["vs. unpruned low", "vs. unpruned high"]].isna().all()
    d = bleu_difference(worse, refs, refs)
    assert t.loc["lottery ticket", ["vs. unpruned low", "vs. unpruned high"]].tolist() == [d["low"], d["high"]]
    assert d["high"] < 0                       # a third of the sentences wrong: the ticket is behind


def test_ticket_summary_reads_the_masks_and_the_comparison():
    """Masks parsed with the model's shapes (2 layers x 3 heads); the paragraph's numbers worked out
    by hand: 20.00 - 21.00 = -1.00, shared heads 1.1 only, the ticket in 2 layers, Hard Concrete in 1."""
    import pandas as pd

    from headlib.pruning.lottery import ticket_summary
    row = {"mask": "enc-self:100/011", "total_updates": 1234, "ticket_minutes": 12.4, "device": "cpu"}
    hc = {"mask": "enc-self:110/000,dec-self:111/111"}
    table = pd.DataFrame([("unpruned", 6, 30, 21.0, 1.0), ("lottery ticket", 3, 39, 20.0, 1.25),
                          ("Hard Concrete (lambda 0.01)", 2, 35, 20.5, 1.6)],
                         columns=["method", "encoder heads", "updates", "BLEU", "encoder speed-up"])
    layers = {"enc-self": 2, "dec-self": 2, "dec-enc": 2}
    s = ticket_summary(row, table, hc, layers, 3)
    assert s.kept.tolist() == [[1, 0, 0], [0, 1, 1]] and s.hc_kept.tolist() == [[1, 1, 0], [0, 0, 0]]
    assert s.text == ("The ticket scores **20.00** BLEU against 21.00 for the unpruned model (-1.00), after 1,234 "
                      "updates in all (12 minutes for the retraining on cpu). Hard Concrete's point with 2 heads "
                      "scores 20.50; the two masks share 1 heads, and the ticket keeps heads in 2 of 2 layers "
                      "(Hard Concrete: 1).")
    alone = ticket_summary(row, table.iloc[:2], None, layers, 3)
    assert alone.hc_kept is None and alone.text.endswith("on cpu).")
