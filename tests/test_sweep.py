"""Sec. 6 sweeps: fixed head masks (the from-scratch baseline), cached sweep points, and the
readers of a sweep (order of kinds, survival, enrichment) on hand-built sweeps with known answers."""
import dataclasses
import json
import math

import pandas as pd
import pytest
import torch

from headlib.config import get_config
from headlib.nn.model import Transformer, mask_spec, parse_mask_spec
from headlib.pruning.sweep import (canonical_spec, enrichment, method_gaps, nearest, prune_point, pruning_order,
                                   scratch_config, survival)

LAYERS = {"enc-self": 2, "dec-self": 2, "dec-enc": 2}


def test_mask_spec_round_trip_and_errors_name_the_key():
    masks = {"enc-self": torch.tensor([[1.0, 0, 1, 1], [0, 0, 0, 1]]), "dec-enc": torch.ones(2, 4)}
    spec = mask_spec(masks)
    assert spec == "enc-self:1011/0001,dec-enc:1111/1111"
    back = parse_mask_spec(spec, LAYERS, 4)
    assert set(back) == set(masks) and all(torch.equal(back[k], masks[k]) for k in masks)
    for bad in ("enc-self:1011", "enc-self:1012/0001", "cross:1111/1111", "enc-self:10110/0001"):
        with pytest.raises(ValueError, match="model.head_mask"):
            get_config("smoke", [f"model.head_mask={bad}"])


def test_canonical_spec_drops_all_on_kinds_so_equal_models_share_a_run():
    spec = "enc-self:1011/0001,dec-self:1111/1111,dec-enc:1111/1111"
    assert canonical_spec(spec) == "enc-self:1011/0001"
    a = scratch_config("smoke", "en-de", 1, spec, 7)
    b = scratch_config("smoke", "en-de", 1, "enc-self:1011/0001", 7)
    assert a.digest() == b.digest() != scratch_config("smoke", "en-de", 1, "", 7).digest()


def test_config_mask_equals_setting_the_mask_by_hand():
    cfg = get_config("smoke", ["model.head_mask=enc-self:1011/0001,dec-enc:0111/1110"])
    torch.manual_seed(0)
    masked = Transformer(cfg.model, 50).eval()
    torch.manual_seed(0)
    by_hand = Transformer(get_config("smoke").model, 50).eval()
    for kind, m in parse_mask_spec(cfg.model.head_mask, LAYERS, 4).items():
        by_hand.set_head_mask(kind, m)
    src, tgt = torch.randint(4, 50, (3, 7)), torch.randint(4, 50, (3, 5))
    assert torch.equal(masked(src, tgt), by_hand(src, tgt))


def test_from_scratch_training_never_updates_masked_heads(tmp_path):
    """A head fixed to 0 gets no gradient: its query/key/value rows and its W^O columns keep
    their initial values bitwise, while the open heads train."""
    from headlib.train.trainer import Trainer
    cfg = get_config("smoke", ["model.head_mask=enc-self:1011/0001", "train.max_steps=4", "train.eval_every=100"])
    trainer = Trainer(cfg, tmp_path / "run", progress=False)
    before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    trainer.fit()
    after = trainer.model.state_dict()
    dh = cfg.model.d_model // cfg.model.n_heads
    for layer, head, closed in ((0, 1, True), (1, 0, True), (0, 0, False), (1, 3, False)):
        rows = slice(head * dh, (head + 1) * dh)
        for proj in ("q_proj", "k_proj", "v_proj"):
            name = f"encoder.{layer}.self_attn.{proj}.weight"
            assert torch.equal(before[name][rows], after[name][rows]) == closed, (name, head)
        name = f"encoder.{layer}.self_attn.out_proj.weight"
        assert torch.equal(before[name][:, rows], after[name][:, rows]) == closed, (name, head)
    assert torch.equal(after["head_mask_enc_self"], torch.tensor([[1.0, 0, 1, 1], [0, 0, 0, 1]]))


def _row(lam, enc, dec_self=None, kinds=("enc-self",)):
    masks = {"enc-self": torch.tensor(enc, dtype=torch.float)}
    if dec_self is not None:
        masks["dec-self"] = torch.tensor(dec_self, dtype=torch.float)
    return {"lam": lam, "kinds": list(kinds), "mask": mask_spec(masks),
            "retained": {k: int(m.sum()) for k, m in masks.items()},
            "per_layer": {k: m.sum(1).int().tolist() for k, m in masks.items()}}


def test_prune_point_is_read_back_unless_it_came_from_another_model(tmp_path, monkeypatch):
    from headlib.pruning import sweep
    from headlib.pruning.prune import PruneConfig
    torch.manual_seed(0)
    model = Transformer(get_config("smoke").model, 50)
    cfg = PruneConfig(lam=0.3, steps=5)
    stored = _row(0.3, [[1, 0], [0, 1]]) | {"model": model.fingerprint()}
    (tmp_path / sweep.point_name(cfg)).write_text(json.dumps(stored))

    class Recomputed(Exception):
        pass

    def prune(*args, **kwargs):
        raise Recomputed
    monkeypatch.setattr(sweep, "prune", prune)
    assert prune_point(model, None, cfg, "en-de", 1.0, 4, tmp_path) == stored
    with torch.no_grad():
        model.embed.weight[5, 0] += 1e-3                    # a retrained baseline: another model
    with pytest.raises(Recomputed):
        prune_point(model, None, cfg, "en-de", 1.0, 4, tmp_path)


def test_a_cached_point_with_other_settings_under_its_name_is_an_error(tmp_path):
    from headlib.pruning import sweep
    from headlib.pruning.prune import PruneConfig
    model = Transformer(get_config("smoke").model, 50)
    cfg = PruneConfig(method="dsp", k=2, steps=5)
    stored = _row(0.01, [[1, 0], [0, 1]]) | {"model": model.fingerprint(),
                                             "prune_config": {"method": "dsp", "k": 2, "steps": 5, "lr": 1e-3}}
    (tmp_path / sweep.point_name(cfg)).write_text(json.dumps(stored))
    with pytest.raises(ValueError, match=r"other settings \(lr\)"):
        prune_point(model, None, cfg, "en-de", 1.0, 4, tmp_path)
    stored["prune_config"]["lr"] = cfg.lr      # settings the row does not record are not compared
    (tmp_path / sweep.point_name(cfg)).write_text(json.dumps(stored))
    assert prune_point(model, None, cfg, "en-de", 1.0, 4, tmp_path) == stored


def test_nearest_survival_and_order_on_a_hand_built_sweep():
    rows = [_row(0.01, [[1, 1], [1, 1]]), _row(0.1, [[1, 0], [1, 1]]), _row(1.0, [[0, 0], [0, 1]])]
    assert nearest(rows, 3)["lam"] == 0.1
    assert nearest(rows, 2)["lam"] == 0.1   # ties go to the smaller lambda
    surv = survival(rows).set_index(["layer", "head"])["survives_to_lambda"]
    assert surv.to_dict() == {(1, 1): 0.1, (1, 2): 0.01, (2, 1): 0.1, (2, 2): 1.0}
    table = pd.DataFrame({"lambda": [0.001, 0.01, 0.1, 1.0], "enc-self heads": [48, 20, 5, 0],
                          "dec-self heads": [48, 40, 20, 3], "dec-enc heads": [48, 48, 30, 10],
                          "total heads": [144, 108, 55, 13]})
    assert pruning_order(table) == [("enc-self", 0.01), ("dec-self", 0.1), ("dec-enc", 1.0)]


def test_enrichment_finds_retained_heads_that_are_the_specialized_and_relevant_ones():
    heads = pd.DataFrame({"layer": [1] * 8 + [2] * 8, "head": list(range(1, 9)) * 2})
    kept = [[1, 1, 1, 1, 0, 0, 0, 0], [1, 1, 1, 1, 0, 0, 0, 0]]
    heads["specialized"] = [h <= 4 for h in heads["head"]]
    heads["relevance"] = [1.0 if h <= 4 else 0.0 for h in heads["head"]] + 0.01 * heads.index
    row = enrichment([_row(0.1, kept)], heads).iloc[0]
    assert row["retained"] == 8 and row["specialized retained"] == 8 and row["specialized pruned"] == 0
    assert row["Fisher p"] < 1e-3 and row["Mann-Whitney p"] < 1e-3
    flipped = enrichment([_row(0.1, [[1 - v for v in r] for r in kept])], heads).iloc[0]
    assert flipped["Fisher p"] > 0.99 and flipped["Mann-Whitney p"] > 0.99


def test_encoder_first_cross_last_needs_a_real_order():
    from headlib.pruning.sweep import encoder_first_cross_last
    inf = float("inf")
    assert encoder_first_cross_last([("enc-self", 0.01), ("dec-self", 0.1), ("dec-enc", inf)])
    assert not encoder_first_cross_last([("enc-self", inf), ("dec-self", inf), ("dec-enc", inf)])   # nothing pruned
    assert not encoder_first_cross_last([("dec-self", 0.01), ("enc-self", 0.1), ("dec-enc", 1.0)])
    assert not encoder_first_cross_last([("enc-self", 0.1), ("dec-enc", 0.1), ("dec-self", 0.1)])   # a tie is not first


def test_method_gaps_compare_the_random_mean_with_the_best_method_per_k():
    methods = pd.DataFrame([(3, "DSP", 30.0), (3, "random", 26.0), (3, "random", 28.0), (3, "LRP", 29.0),
                            (3, "from scratch", 33.0), (12, "DSP", 35.0), (12, "random", 35.2), (12, "LRP", 34.6)],
                           columns=["k", "method", "BLEU"])
    gaps = method_gaps(methods).set_index("k")
    assert gaps.loc[3, "best"] == "DSP" and gaps.loc[3, "best BLEU"] == 30.0   # from scratch left out
    assert gaps.loc[3, "spread"] == pytest.approx(3.0) and gaps.loc[3, "random gap"] == pytest.approx(3.0)
    assert gaps.loc[12, "best"] == "random" and gaps.loc[12, "random gap"] == 0.0
    assert gaps.loc[12, "spread"] == pytest.approx(0.6)


def test_the_choice_of_heads_matters_only_beyond_every_random_draw_and_the_seed_spread():
    import pandas as pd

    from headlib.pruning.sweep import choice_of_heads_verdict
    rows = [(3, "LRP", 35.0), (3, "random", 34.0), (3, "random", 34.2), (3, "random", 33.0),
            (10, "LRP", 34.8), (10, "random", 34.9), (10, "random", 33.5), (10, "random", 33.6),
            (12, "LRP", 35.0), (12, "random", 34.8), (12, "random", 34.7), (3, "from scratch", 40.0)]
    methods = pd.DataFrame(rows, columns=["k", "method", "BLEU"])
    # k=3: above every draw, mean 33.73 is 1.27 behind; k=10: one draw above LRP; k=12: 0.25 behind
    assert "matters beyond the fine-tuning budget at 3 heads" in choice_of_heads_verdict(methods, 0.57)
    assert "at 3, 12 heads" in choice_of_heads_verdict(methods, None)
    assert "at no head count" in choice_of_heads_verdict(methods, 2.0)


def test_mean_open_layer_weights_layers_by_open_heads_over_partly_pruned_points():
    from headlib.pruning.sweep import mean_open_layer
    rows = [{"retained": {"dec-enc": 8}, "per_layer": {"dec-enc": [4, 4]}},       # nothing closed: left out
            {"retained": {"dec-enc": 4}, "per_layer": {"dec-enc": [1, 3]}},       # layers 1, 2, 2, 2
            {"retained": {"dec-enc": 2}, "per_layer": {"dec-enc": [0, 2]}},       # layers 2, 2
            {"retained": {"dec-enc": 0}, "per_layer": {"dec-enc": [0, 0]}}]       # all closed: left out
    assert mean_open_layer(rows, "dec-enc", 8) == pytest.approx(11 / 6)
    assert math.isnan(mean_open_layer(rows[:1], "dec-enc", 8))


def _point(lam, mask, bleu):
    return {"lam": lam, "mask": mask, "test_beam": bleu}


def test_pruned_points_meet_the_from_scratch_run_of_their_mask():
    """All-kinds points match a run trained with their mask however it was written (an encoder-only
    spec for a point that closed only encoder heads); a point with no run gets NaN; several points
    with one mask all meet its run (the all-attention table, one row per point)."""
    from headlib.pruning.sweep import pruned_vs_scratch
    on = "dec-self:11/11,dec-enc:11/11"
    rows = [_point(0.01, f"enc-self:11/11,{on}", 30.0),                     # nothing closed: no run
            _point(0.1, f"enc-self:10/01,{on}", 29.0),
            _point(0.2, "enc-self:10/01,dec-self:10/11,dec-enc:11/11", 28.0),   # same encoder, not the same model
            _point(0.5, f"enc-self:10/01,{on}", 27.5)]
    scratch = [{"mask": "enc-self:10/01", "test_beam": 28.5, "device": "cpu"},
               {"mask": "enc-self:10/01,dec-self:10/11", "test_beam": 28.25, "device": "gpu"}]
    t = pruned_vs_scratch(rows, scratch)
    assert list(t.columns) == ["mask", "lambda", "pruned", "from scratch", "pruned - scratch", "scratch device"]
    assert t["lambda"].tolist() == [0.01, 0.1, 0.2, 0.5] and t["pruned"].tolist() == [30.0, 29.0, 28.0, 27.5]
    assert t["mask"].tolist() == ["", "enc-self:10/01", "enc-self:10/01,dec-self:10/11", "enc-self:10/01"]
    assert math.isnan(t["from scratch"][0]) and math.isnan(t["pruned - scratch"][0]) and pd.isna(t["scratch device"][0])
    assert t["from scratch"][1:].tolist() == [28.5, 28.25, 28.5]
    assert t["pruned - scratch"][1:].tolist() == pytest.approx([0.5, -0.25, -1.0])
    assert t["scratch device"][1:].tolist() == ["cpu", "gpu", "cpu"]


def test_scratch_table_puts_each_run_beside_the_first_point_with_its_mask():
    """The encoder page: one row per run in the runs' order, the first point (in the sweep's order)
    with its mask; a run no point has the mask of is an error."""
    from headlib.pruning.sweep import scratch_table
    on = "dec-self:11/11,dec-enc:11/11"
    rows = [_point(0.01, f"enc-self:11/10,{on}", 30.0), _point(0.1, f"enc-self:10/00,{on}", 29.0),
            _point(0.2, f"enc-self:10/00,{on}", 28.0)]
    scratch = [{"mask": "enc-self:10/00", "retained": {"enc-self": 1}, "test_beam": 28.5, "device": "cpu"},
               {"mask": "enc-self:11/10", "retained": {"enc-self": 3}, "test_beam": 30.5, "device": "gpu"}]
    t = scratch_table(rows, scratch)
    assert list(t.columns) == ["encoder heads", "lambda", "pruned", "from scratch", "pruned - scratch", "scratch device"]
    assert t.values.tolist() == [[1, 0.1, 29.0, 28.5, 0.5, "cpu"], [3, 0.01, 30.0, 30.5, -0.5, "gpu"]]
    with pytest.raises(ValueError, match="enc-self:01/00"):
        scratch_table(rows, [{"mask": "enc-self:01/00", "retained": {"enc-self": 1}, "test_beam": 1.0, "device": "cpu"}])


def test_method_comparison_picks_each_methods_point_per_head_count():
    """At each k: Hard Concrete's first point with exactly k heads (none at k=1), DSP, the fixed masks
    asked for (fine-tuned through the callback, random draws named "random"), and the from-scratch
    runs with k encoder heads and every decoder head; the table shows means, and mean ± std for the
    random draws."""
    from headlib.pruning.sweep import method_comparison, method_table
    measures = pd.DataFrame({"layer": [1, 1, 2, 2], "head": [1, 2, 1, 2], "confidence": [0.9, 0.1, 0.2, 0.8],
                             "LRP": [0.1, 0.9, 0.8, 0.2], "gradient (Michel)": [0.5, 0.6, 0.7, 0.1]})
    bleu = {"random-s1": 20.0, "random-s2": 22.0, "confidence": 25.0, "lrp": 26.0, "michel": 27.0}
    asked = []

    def fine_tune(**kw):
        asked.append((kw["label"], kw["mask"]))
        return {"test_beam": bleu[kw["label"]], "device": "cpu"}

    hc = [{"lam": 0.01, "retained": {"enc-self": 2}, "test_beam": 24.0, "device": "gpu"},
          {"lam": 0.02, "retained": {"enc-self": 2}, "test_beam": 23.0, "device": "gpu"}]
    dsp = {1: {"test_beam": 18.0, "device": "cpu"}, 2: {"test_beam": 21.0, "device": "cpu"}}
    scratch = [{"retained": {"enc-self": 2, "dec-self": 4, "dec-enc": 4}, "test_beam": 28.0, "device": "gpu"},
               {"retained": {"enc-self": 2, "dec-self": 3, "dec-enc": 4}, "test_beam": 1.0, "device": "gpu"}]
    t = method_comparison([2, 1], hc, dsp, fine_tune, measures, ["random", "confidence", "michel"], (1, 2), scratch, 4)
    assert t.values.tolist() == [
        [2, "Hard Concrete", 24.0, "gpu"], [2, "DSP", 21.0, "cpu"], [2, "random", 20.0, "cpu"],
        [2, "random", 22.0, "cpu"], [2, "confidence", 25.0, "cpu"], [2, "gradient (Michel)", 27.0, "cpu"],
        [2, "from scratch", 28.0, "gpu"], [1, "DSP", 18.0, "cpu"], [1, "random", 20.0, "cpu"],
        [1, "random", 22.0, "cpu"], [1, "confidence", 25.0, "cpu"], [1, "gradient (Michel)", 27.0, "cpu"]]
    # each measure's masks keep its top heads: confidence 1.1, 2.2 at k=2 and 1.1 at k=1; gradient 2.1, 1.2 and 2.1
    assert [m for label, m in asked if label == "confidence"] == ["enc-self:10/01", "enc-self:10/00"]
    assert [m for label, m in asked if label == "michel"] == ["enc-self:01/10", "enc-self:00/10"]
    table = method_table(t)
    assert list(table.index) == ["Hard Concrete", "DSP", "random", "confidence", "gradient (Michel)", "from scratch"]
    assert list(table.columns) == ["1 heads", "2 heads"]
    assert table.loc["random", "2 heads"] == "21.00 ± 1.41 (n=2)" and table.loc["DSP", "1 heads"] == "18.00"
    assert table.loc["Hard Concrete", "1 heads"] == "" and table.loc["from scratch", "2 heads"] == "28.00"


def test_path_points_score_the_continuation_path_and_read_a_finished_one_back(tmp_path, monkeypatch):
    import os

    from headlib.pruning import sweep
    from headlib.pruning.prune import PruneConfig, prune
    from headlib.train.trainer import prepare_data
    monkeypatch.setenv("HEADLIB_ARTIFACTS", os.environ.get("HEADLIB_ARTIFACTS", str(tmp_path / "artifacts")))
    cfg = get_config("smoke")
    data = prepare_data(cfg)
    torch.manual_seed(0)
    model = Transformer(cfg.model, data.bpe.vocab_size)
    pc = PruneConfig(steps=4, gate_lr=0.1)
    rows = sweep.path_points(model, data, pc, [0.0, 5.0], "en-de", 1.0, 1, tmp_path)
    assert [r["lam"] for r in rows] == [0.0, 5.0] and [r["path_updates"] for r in rows] == [4, 8]
    assert all(len(r["dev_hypotheses"]) == len(data.dev.src) for r in rows)
    alone = prune(model, data, dataclasses.replace(pc, lam=0.0))[0]      # the first point is the independent one
    assert rows[0]["mask"] == sweep.counts(alone)["mask"]
    monkeypatch.setattr(sweep, "prune_path", lambda *a, **k: pytest.fail("recomputed a finished path"))
    assert sweep.path_points(model, data, pc, [0.0, 5.0], "en-de", 1.0, 1, tmp_path) == rows
    stored = json.loads((tmp_path / sweep.path_name(pc)).read_text())
    assert stored["finished"] and stored["model"] == model.fingerprint()
    independent = sweep.prune_point(model, data, dataclasses.replace(pc, lam=5.0), "en-de", 1.0, 1, tmp_path)
    assert sweep.points(tmp_path, pc.kinds, model) == rows          # the path is the curve, not a validation point
    (tmp_path / sweep.path_name(pc)).unlink()
    assert sweep.points(tmp_path, pc.kinds, model) == [json.loads(json.dumps(independent))]   # as stored


def test_an_interrupted_path_resumes_from_its_checkpoint_as_if_never_stopped(tmp_path, monkeypatch):
    """A path stopped while scoring its third lambda goes on from the checkpoint that the second
    left: the first two lambdas are not fine-tuned again, and every point equals the uninterrupted
    path's (but for the minutes it took)."""
    from headlib.pruning import prune as prune_module, sweep
    from headlib.pruning.prune import PruneConfig
    from headlib.train.trainer import prepare_data
    monkeypatch.setenv("HEADLIB_ARTIFACTS", str(tmp_path / "artifacts"))
    cfg = get_config("smoke")
    data = prepare_data(cfg)
    torch.manual_seed(0)
    model = Transformer(cfg.model, data.bpe.vocab_size)
    pc, lams = PruneConfig(steps=4, gate_lr=0.1), [0.0, 2.0, 5.0]
    whole = sweep.path_points(model, data, pc, lams, "en-de", 1.0, 1, tmp_path / "whole")
    assert not sweep.path_checkpoint(model.fingerprint(), pc).exists()      # removed once finished

    score, calls = sweep.evaluate_masked, []
    def stop_at_the_third(*a, **k):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return score(*a, **k)
    monkeypatch.setattr(sweep, "evaluate_masked", stop_at_the_third)
    with pytest.raises(KeyboardInterrupt):
        sweep.path_points(model, data, pc, lams, "en-de", 1.0, 1, tmp_path / "stopped")
    assert sweep.path_checkpoint(model.fingerprint(), pc).is_file()
    monkeypatch.setattr(sweep, "evaluate_masked", score)
    trained = []
    train = prune_module.Pruning.train
    monkeypatch.setattr(prune_module.Pruning, "train", lambda self, steps, lam, *a: (trained.append(lam),
                                                                                     train(self, steps, lam, *a)))
    resumed = sweep.path_points(model, data, pc, lams, "en-de", 1.0, 1, tmp_path / "stopped")
    assert trained == [5.0]
    timeless = lambda rows: [{k: v for k, v in r.items() if not k.endswith("_minutes")} for r in rows]
    assert timeless(resumed) == timeless(whole)


def _path_row(lam, heads, hyps, steps=None, path_updates=None):
    row = {"lam": lam, "kinds": ["enc-self"], "retained": {"enc-self": heads}, "dev_hypotheses": hyps, "test_beam": 30.0}
    return row | ({"prune_config": {"steps": steps}} if steps else {"path_updates": path_updates})


def test_path_validation_needs_heads_within_two_and_dev_bleu_within_the_bootstrap_interval():
    from headlib.pruning.sweep import path_validation
    refs = [f"a man rides a {c} bike down the {s} street" for c in ("red", "blue", "old") for s in ("long", "wide", "busy")] * 8
    good = [r.replace("street", "road") if i % 3 == 0 else r for i, r in enumerate(refs)]
    bad = [" ".join(r.split()[:3]) for r in refs]
    independent = [_path_row(0.01, 40, good, steps=500), _path_row(0.05, 20, good, steps=500)]
    path = [_path_row(0.005, 45, good, path_updates=100), _path_row(0.01, 42, good, path_updates=200),
            _path_row(0.05, 23, bad, path_updates=300)]
    result = path_validation(path, independent, refs)
    first, second = result["points"]
    assert first["heads_agree"] and first["bleu_agrees"]                     # 40 vs 42 heads, same output
    assert not second["heads_agree"] and not second["bleu_agrees"] and not result["agrees"]   # 20 vs 23; worse output
    assert (result["path_updates"], result["independent_updates"], result["update_ratio"]) == (300, 1500, 0.2)
    with pytest.raises(ValueError, match="lambda 0.2 is not on the path"):
        path_validation(path, [_path_row(0.2, 10, good, steps=500)], refs)


def test_the_scratch_plan_takes_the_nearest_points_masks_with_their_budgets_and_an_all_heads_control():
    from headlib.pruning.sweep import scratch_plan
    def row(heads, mask, updates):
        return {"lam": heads / 100, "kinds": ["enc-self"], "retained": {"enc-self": heads}, "mask": mask,
                "path_updates": updates}
    rows = [row(40, "enc-self:1110,dec-enc:0111", 100), row(12, "enc-self:1000,dec-enc:0011", 300),
            row(4, "enc-self:0001,dec-enc:0001", 500)]
    assert scratch_plan(rows, [11, 3], 2800, "encoder") == [("enc-self:1000", 3100), ("enc-self:0001", 3300),
                                                             ("", 3100)]
    assert scratch_plan(rows, [40], 2800, "all") == [("enc-self:1110,dec-enc:0111", 2900), ("", 2900)]


def test_matched_budget_adds_the_fine_tuning_to_the_baselines_training():
    from headlib.pruning.sweep import matched_budget
    assert matched_budget(2800, {"prune_config": {"steps": 500}}) == 3300
    assert matched_budget(2800, {"path_updates": 300, "prune_config": {"steps": 100}}) == 3100


def test_validation_lambdas_are_spread_inside_the_grid():
    from headlib.pruning.sweep import validation_lambdas
    grid = [0.0005, 0.001, 0.002, 0.003, 0.004, 0.005, 0.007, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5]
    assert validation_lambdas(grid) == [0.003, 0.007, 0.05]               # grid[3], grid[6], grid[9]
    assert validation_lambdas([0.01, 1.0]) == [0.01, 1.0]


def test_dev_choice_counts_which_setting_scores_higher_on_dev_at_each_head_count():
    from headlib.pruning.sweep import dev_choice
    runs = [(3, 0.02, {"dev_greedy": 10.0, "test_beam": 99.0}), (3, 0.2, {"dev_greedy": 12.0, "test_beam": 1.0}),
            (12, 0.02, {"dev_greedy": 20.0}), (12, 0.2, {"dev_greedy": 21.0}),
            (24, 0.02, {"dev_greedy": 30.0}), (24, 0.2, {"dev_greedy": 29.0})]
    assert dev_choice(runs) == {"wins": {0.02: 1, 0.2: 2}, "chosen": 0.2, "head_counts": 3}   # test BLEU plays no part
    from headlib.pruning.sweep import dev_choice_note
    assert dev_choice_note(dev_choice(runs), 0.2, "the rate").endswith("2 of 3 head counts, so dev agrees with the "
                                                                        "setting used above.")
    assert "dev would choose 0.2, not the 0.02 used above" in dev_choice_note(dev_choice(runs), 0.02, "the rate")
    taus = [(3, (0.1, 1e-3), {"dev_greedy": 10.0}), (3, (0.1, 1e-8), {"dev_greedy": 11.0})]
    assert dev_choice(taus)["chosen"] == (0.1, 1e-8)


def test_a_dsp_point_with_another_temperature_is_another_point():
    from headlib.pruning.prune import DSP_TAU, PruneConfig
    from headlib.pruning.sweep import point_name
    ours, theirs = PruneConfig(method="dsp", k=12), PruneConfig(method="dsp", k=12, tau=DSP_TAU)
    assert point_name(ours) == "enc-self-dsp-k12-lr0.2-s500.json"          # the committed points' names stay
    assert point_name(theirs) == "enc-self-dsp-k12-lr0.2-tau0.1-1e-08-s500.json"


def test_a_recorded_model_serves_cached_results_without_its_weights_and_names_them_when_needed(tmp_path, monkeypatch):
    """A page run on a machine that never trained the model (only its committed record): cached
    points are read under the record's fingerprint; a point that is not cached needs the weights,
    and their absence is one error naming the file; weights that are another model are refused."""
    from headlib.files import torch_save
    from headlib.pruning import sweep
    from headlib.pruning.prune import PruneConfig
    from headlib.train.records import RecordedModel
    from headlib.train.trainer import prepare_data
    monkeypatch.setenv("HEADLIB_ARTIFACTS", str(tmp_path / "artifacts"))
    cfg = get_config("smoke")
    data = prepare_data(cfg)
    torch.manual_seed(0)
    model = Transformer(cfg.model, data.bpe.vocab_size).eval()
    pc = PruneConfig(steps=2, lam=0.5)
    full = sweep.full_point(model, data, "en-de", 1.0, 1, tmp_path)
    point = sweep.prune_point(model, data, pc, "en-de", 1.0, 1, tmp_path)
    record = {"config": cfg.to_dict(), "fingerprint": model.fingerprint(), "run_dir": "en-de-smoke-x",
              "profile": "smoke", "pair": "en-de"}
    absent = RecordedModel(record, tmp_path / "runs" / "final.pt")
    assert sweep.full_point(absent, data, "en-de", 1.0, 1, tmp_path) == full
    assert sweep.prune_point(absent, data, pc, "en-de", 1.0, 1, tmp_path) == json.loads(json.dumps(point))   # as stored
    with pytest.raises(FileNotFoundError, match=r"final\.pt: the weights of model en-de-smoke-x"):
        sweep.prune_point(absent, data, dataclasses.replace(pc, lam=0.7), "en-de", 1.0, 1, tmp_path)

    torch.manual_seed(1)
    other = Transformer(cfg.model, data.bpe.vocab_size)
    torch_save(tmp_path / "runs" / "final.pt", {"model": other.state_dict(), "config": cfg.to_dict(),
                                                "vocab_size": data.bpe.vocab_size})
    data.bpe.save(tmp_path / "runs" / "bpe.json")
    with pytest.raises(ValueError, match=f"says {model.fingerprint()}"):
        RecordedModel(record, tmp_path / "runs" / "final.pt").load()
    torch_save(tmp_path / "runs" / "final.pt", {"model": model.state_dict(), "config": cfg.to_dict(),
                                                "vocab_size": data.bpe.vocab_size})
    present = RecordedModel(record, tmp_path / "runs" / "final.pt")
    assert present.load().fingerprint() == model.fingerprint() and present.load() is present.load()


def test_the_command_line_computes_a_settings_curve_with_its_validation_then_the_scratch_runs_it_plans(smoke_run):
    """`python -m headlib.pruning.sweep curve` then `scratches`: the units a Sec. 6 page is computed in."""
    from headlib.pruning import sweep
    from headlib.settings import results_dir
    _, run = smoke_run
    sweep.main(["curve", "--profile", "smoke", "--setting", "encoder"])
    out = results_dir("smoke", "en-de", 1) / "pruning"
    checked = json.loads((out / "enc-self-path-validation.json").read_text())
    lams = sweep.lambda_grid("smoke", "encoder")
    assert [p["lam"] for p in checked["points"]] == sweep.validation_lambdas(lams) and checked["update_ratio"] == 0.2
    assert [r["lam"] for r in sweep.points(out, ("enc-self",))] == lams
    sweep.main(["scratches", "--profile", "smoke", "--setting", "encoder"])
    baseline = json.loads((run / "results.json").read_text())["steps"]
    plan = sweep.scratch_plan(sweep.points(out, ("enc-self",)), sweep.scratch_head_counts("smoke", "encoder"),
                              baseline, "encoder")
    trained = {(r["mask"], r["steps"]) for r in sweep.scratch_rows(out)}
    assert set(plan) <= trained
