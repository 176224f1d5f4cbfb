"""Sec. 6 sweeps, the computation (`headlib.pruning.points`): fixed head masks (the from-scratch
baseline), cached sweep points, the continuation path and its validation, and the command line
(`python -m headlib.pruning`)."""
import dataclasses
import json

import pytest
import torch

from headlib.config import get_config
from headlib.data.corpora import load_split, main_test_set
from headlib.nn.decode import score
from headlib.nn.masks import parse_spec
from headlib.nn.model import Transformer
from headlib.pruning.points import prune_point, read_point, scratch_config
from pruning_helpers import point_row

LAYERS = {"enc-self": 2, "dec-self": 2, "dec-enc": 2}


def test_specs_equal_but_for_all_on_kinds_share_a_from_scratch_run():
    spec = "enc-self:1011/0001,dec-self:1111/1111,dec-enc:1111/1111"
    a = scratch_config("smoke", "en-de", 1, spec, 7)
    b = scratch_config("smoke", "en-de", 1, "enc-self:1011/0001", 7)
    assert a.digest() == b.digest() != scratch_config("smoke", "en-de", 1, "", 7).digest()


def test_a_point_of_another_model_is_not_read_and_left_as_it_is(tmp_path, capsys):
    path = tmp_path / "full.json"
    path.write_text(json.dumps({"model": "aaaa", "test_beam": 30.0}))
    assert read_point(path, "aaaa") == {"model": "aaaa", "test_beam": 30.0}
    assert read_point(path, "bbbb") is None
    assert "not bbbb: not used" in capsys.readouterr().out   # reading recomputes nothing
    assert json.loads(path.read_text())["model"] == "aaaa"
    assert read_point(tmp_path / "missing.json", "aaaa") is None


def test_config_mask_equals_setting_the_mask_by_hand():
    cfg = get_config("smoke", ["model.head_mask=enc-self:1011/0001,dec-enc:0111/1110"])
    torch.manual_seed(0)
    masked = Transformer(cfg.model, 50).eval()
    torch.manual_seed(0)
    by_hand = Transformer(get_config("smoke").model, 50).eval()
    for kind, m in parse_spec(cfg.model.head_mask, LAYERS, 4).items():
        by_hand.set_head_mask(kind, m)
    src, tgt = torch.randint(4, 50, (3, 7)), torch.randint(4, 50, (3, 5))
    assert torch.equal(masked(src, tgt), by_hand(src, tgt))


def test_from_scratch_training_never_updates_masked_heads(tmp_path):
    """A head fixed to 0 gets no gradient: its query/key/value rows and its W^O columns keep
    their initial values bitwise, while the open heads train."""
    from headlib.train import Trainer
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


def test_prune_point_is_read_back_unless_it_came_from_another_model(tmp_path, monkeypatch):
    from headlib.pruning import points
    from headlib.pruning.prune import PruneConfig
    torch.manual_seed(0)
    model = Transformer(get_config("smoke").model, 50)
    cfg = PruneConfig(lam=0.3, steps=5)
    stored = point_row(0.3, [[1, 0], [0, 1]]) | {"model": model.fingerprint()}
    (tmp_path / points.point_name(cfg)).write_text(json.dumps(stored))

    class Recomputed(Exception):
        pass

    def prune(*args, **kwargs):
        raise Recomputed
    monkeypatch.setattr(points, "prune", prune)
    assert prune_point(model, None, cfg, "en-de", 1.0, 4, tmp_path) == stored
    with torch.no_grad():
        model.embed.weight[5, 0] += 1e-3                    # a retrained baseline: another model
    with pytest.raises(Recomputed):
        prune_point(model, None, cfg, "en-de", 1.0, 4, tmp_path)


def test_the_all_heads_control_fine_tunes_with_every_head_open_and_no_gate(tmp_path, monkeypatch):
    """The control of an independent curve is a fixed-mask fine-tuning of the gated kinds with
    every head open, keeping its translations (C6's intervals resample them)."""
    from headlib.pruning import points
    seen = {}

    def prune_point(model, data, cfg, pair, alpha, beam, out, progress=False, hypotheses=False, describe=None):
        seen.update(cfg=cfg, hypotheses=hypotheses, name=points.point_name(cfg))
        return {}
    monkeypatch.setattr(points, "prune_point", prune_point)
    model = Transformer(get_config("smoke").model, 50)
    points.all_heads_control(model, None, ("enc-self",), 7, 3, "en-de", 1.0, 4, tmp_path)
    cfg = seen["cfg"]
    assert cfg.method == "fixed" and cfg.steps == 7 and cfg.seed == 3 and seen["hypotheses"]
    assert parse_spec(cfg.mask, {"enc-self": 2}, model.cfg.n_heads)["enc-self"].all()
    assert seen["name"] == f"enc-self-all-heads-k{2 * model.cfg.n_heads}-s7.json"


def test_a_cached_point_with_other_settings_under_its_name_is_an_error(tmp_path):
    from headlib.pruning import points
    from headlib.pruning.prune import PruneConfig
    model = Transformer(get_config("smoke").model, 50)
    cfg = PruneConfig(method="dsp", k=2, steps=5)
    stored = point_row(0.01, [[1, 0], [0, 1]]) | {"model": model.fingerprint(),
                                             "prune_config": {"method": "dsp", "k": 2, "steps": 5, "lr": 1e-3}}
    (tmp_path / points.point_name(cfg)).write_text(json.dumps(stored))
    with pytest.raises(ValueError, match=r"other settings \(lr\)"):
        prune_point(model, None, cfg, "en-de", 1.0, 4, tmp_path)
    stored["prune_config"]["lr"] = cfg.lr      # settings the row does not record are not compared
    (tmp_path / points.point_name(cfg)).write_text(json.dumps(stored))
    assert prune_point(model, None, cfg, "en-de", 1.0, 4, tmp_path) == stored


def untrained_smoke_model():
    """The smoke profile's data and an untrained model of its architecture (seed 0)."""
    from headlib.train import prepare_data
    cfg = get_config("smoke")
    data = prepare_data(cfg)
    torch.manual_seed(0)
    return data, Transformer(cfg.model, data.bpe.vocab_size)


def test_path_points_score_the_continuation_path_and_read_a_finished_one_back(tmp_path, monkeypatch):
    from headlib.pruning import points
    from headlib.pruning.prune import PruneConfig, prune
    data, model = untrained_smoke_model()
    pc = PruneConfig(steps=4, gate_lr=0.1)
    rows = points.path_points(model, data, pc, [0.0, 5.0], "en-de", 1.0, 1, tmp_path)
    assert [r["lam"] for r in rows] == [0.0, 5.0] and [r["path_updates"] for r in rows] == [4, 8]
    assert all(len(r["dev_hypotheses"]) == len(data.dev.src) for r in rows)
    test = load_split("en-de", main_test_set("en-de"))
    assert all(score(r["test_hypotheses"], list(test.tgt))["bleu"] == r["test_beam"] for r in rows)
    alone, result = prune(model, data, dataclasses.replace(pc, lam=0.0))  # the first point is the independent one
    assert rows[0]["mask"] == points.counts(alone)["mask"]
    # the path's budget in target tokens: the first point's is the independent fine-tuning's, and it grows
    assert rows[0]["path_tokens"] == result.tokens > 0 and rows[1]["path_tokens"] > rows[0]["path_tokens"]
    monkeypatch.setattr(points, "prune_path", lambda *a, **k: pytest.fail("recomputed a finished path"))
    assert points.path_points(model, data, pc, [0.0, 5.0], "en-de", 1.0, 1, tmp_path) == rows
    stored = json.loads((tmp_path / points.path_name(pc)).read_text())
    assert stored["finished"] and stored["model"] == model.fingerprint()
    independent = points.prune_point(model, data, dataclasses.replace(pc, lam=5.0), "en-de", 1.0, 1, tmp_path)
    assert points.points(tmp_path, pc.kinds, model) == rows          # the path is the curve, not a validation point
    (tmp_path / points.path_name(pc)).unlink()
    assert points.points(tmp_path, pc.kinds, model) == [json.loads(json.dumps(independent))]   # as stored


def test_each_path_point_records_what_describe_says_of_its_pruned_model(tmp_path, monkeypatch):
    """Fig. 8's functions per point: `describe` sees each point's pruned model (its mask), and a
    finished path without what it adds is computed again, then read back."""
    from headlib.pruning import points
    from headlib.pruning.prune import PruneConfig
    data, model = untrained_smoke_model()
    pc = PruneConfig(steps=2, gate_lr=0.5)
    plain = points.path_points(model, data, pc, [0.0, 50.0], "en-de", 1.0, 1, tmp_path)
    describe = lambda pruned: {"functions": points.counts(pruned)["mask"]}   # noqa: E731
    described = points.path_points(model, data, pc, [0.0, 50.0], "en-de", 1.0, 1, tmp_path, describe=describe)
    assert [r["functions"] for r in described] == [r["mask"] for r in described] == [r["mask"] for r in plain]
    assert [r["test_beam"] for r in described] == [r["test_beam"] for r in plain]      # the same path again
    monkeypatch.setattr(points, "prune_path", lambda *a, **k: pytest.fail("recomputed a described path"))
    assert points.path_points(model, data, pc, [0.0, 50.0], "en-de", 1.0, 1, tmp_path, describe=describe) == described


def test_an_interrupted_path_resumes_from_its_checkpoint_as_if_never_stopped(tmp_path, monkeypatch):
    """A path stopped while scoring its third lambda goes on from the checkpoint that the second
    left: the first two lambdas are not fine-tuned again, and every point equals the uninterrupted
    path's (but for the minutes it took)."""
    from headlib.pruning import points, prune as prune_module
    from headlib.pruning.prune import PruneConfig
    monkeypatch.setenv("HEADLIB_ARTIFACTS", str(tmp_path / "artifacts"))
    data, model = untrained_smoke_model()
    pc, lams = PruneConfig(steps=4, gate_lr=0.1), [0.0, 2.0, 5.0]
    whole = points.path_points(model, data, pc, lams, "en-de", 1.0, 1, tmp_path / "whole")
    assert not points.path_checkpoint(model.fingerprint(), pc).exists()      # removed once finished

    score, calls = points.evaluate_masked, []
    def stop_at_the_third(*a, **k):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return score(*a, **k)
    monkeypatch.setattr(points, "evaluate_masked", stop_at_the_third)
    with pytest.raises(KeyboardInterrupt):
        points.path_points(model, data, pc, lams, "en-de", 1.0, 1, tmp_path / "stopped")
    assert points.path_checkpoint(model.fingerprint(), pc).is_file()
    monkeypatch.setattr(points, "evaluate_masked", score)
    trained = []
    train = prune_module.Pruning.train
    monkeypatch.setattr(prune_module.Pruning, "train", lambda self, steps, lam, *a: (trained.append(lam),
                                                                                     train(self, steps, lam, *a)))
    resumed = points.path_points(model, data, pc, lams, "en-de", 1.0, 1, tmp_path / "stopped")
    assert trained == [5.0]
    timeless = lambda rows: [{k: v for k, v in r.items() if not k.endswith("_minutes")} for r in rows]
    assert timeless(resumed) == timeless(whole)


def _path_row(lam, heads, hyps, steps=None, path_updates=None):
    row = {"lam": lam, "kinds": ["enc-self"], "retained": {"enc-self": heads}, "dev_hypotheses": hyps, "test_beam": 30.0}
    return row | ({"prune_config": {"steps": steps}} if steps else {"path_updates": path_updates})


def test_path_validation_needs_heads_within_two_and_dev_bleu_within_the_bootstrap_interval():
    from headlib.pruning.points import path_validation
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
    # each with path - independent and its 95% interval: 0 for the same output, below 0 for the worse one
    assert (first["dev_path_minus_independent"], first["dev_low"], first["dev_high"]) == (0.0, 0.0, 0.0)
    assert second["dev_high"] < 0 and "test_low" not in second                  # no test translations kept
    with_test = path_validation([r | {"test_hypotheses": r["dev_hypotheses"]} for r in path],
                                [r | {"test_hypotheses": r["dev_hypotheses"]} for r in independent], refs, test_refs=refs)
    assert with_test["points"][1]["test_high"] == second["dev_high"]
    with pytest.raises(ValueError, match="lambda 0.2 is not on the path"):
        path_validation(path, [_path_row(0.2, 10, good, steps=500)], refs)


def test_the_scratch_plan_takes_the_nearest_points_masks_with_their_budgets_and_an_all_heads_control():
    from headlib.pruning.points import scratch_plan
    def row(heads, mask, updates):
        return {"lam": heads / 100, "kinds": ["enc-self"], "retained": {"enc-self": heads}, "mask": mask,
                "path_updates": updates}
    rows = [row(40, "enc-self:1110,dec-enc:0111", 100), row(12, "enc-self:1000,dec-enc:0011", 300),
            row(4, "enc-self:0001,dec-enc:0001", 500)]
    assert scratch_plan(rows, [11, 3], 2800, "encoder") == [("enc-self:1000", 3100), ("enc-self:0001", 3300),
                                                             ("", 3100)]
    assert scratch_plan(rows, [40], 2800, "all") == [("enc-self:1110,dec-enc:0111", 2900), ("", 2900)]


def test_matched_budget_adds_the_fine_tuning_to_the_baselines_training():
    from headlib.pruning.points import matched_budget
    assert matched_budget(2800, {"prune_config": {"steps": 500}}) == 3300
    assert matched_budget(2800, {"path_updates": 300, "prune_config": {"steps": 100}}) == 3100


def test_validation_lambdas_are_spread_inside_the_grid():
    from headlib.pruning.points import validation_lambdas
    grid = [0.0005, 0.001, 0.002, 0.003, 0.004, 0.005, 0.007, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5]
    assert validation_lambdas(grid) == [0.003, 0.007, 0.05]               # grid[3], grid[6], grid[9]
    assert validation_lambdas([0.01, 1.0]) == [0.01, 1.0]


def test_a_dsp_point_with_another_temperature_is_another_point():
    from headlib.pruning.prune import DSP_TAU, PruneConfig
    from headlib.pruning.points import point_name
    ours, theirs = PruneConfig(method="dsp", k=12), PruneConfig(method="dsp", k=12, tau=DSP_TAU)
    assert point_name(ours) == "enc-self-dsp-k12-lr0.2-s500.json"          # the committed points' names stay
    assert point_name(theirs) == "enc-self-dsp-k12-lr0.2-tau0.1-1e-08-s500.json"


def test_a_recorded_model_serves_cached_results_without_its_weights_and_names_them_when_needed(tmp_path, monkeypatch):
    """A page run on a machine that never trained the model (only its committed record): cached
    points are read under the record's fingerprint; a point that is not cached needs the weights,
    and their absence is one error naming the file; weights that are another model are refused."""
    from headlib.files import torch_save
    from headlib.pruning import points
    from headlib.pruning.prune import PruneConfig
    from headlib.train.records import RecordedModel
    from headlib.train import prepare_data
    monkeypatch.setenv("HEADLIB_ARTIFACTS", str(tmp_path / "artifacts"))
    cfg = get_config("smoke")
    data = prepare_data(cfg)
    torch.manual_seed(0)
    model = Transformer(cfg.model, data.bpe.vocab_size).eval()
    pc = PruneConfig(steps=2, lam=0.5)
    full = points.full_point(model, data, "en-de", 1.0, 1, tmp_path)
    point = points.prune_point(model, data, pc, "en-de", 1.0, 1, tmp_path)
    record = {"config": cfg.to_dict(), "fingerprint": model.fingerprint(), "run_dir": "en-de-smoke-x",
              "profile": "smoke", "pair": "en-de"}
    absent = RecordedModel(record, tmp_path / "runs" / "final.pt")
    assert points.full_point(absent, data, "en-de", 1.0, 1, tmp_path) == full
    assert points.prune_point(absent, data, pc, "en-de", 1.0, 1, tmp_path) == json.loads(json.dumps(point))   # as stored
    with pytest.raises(FileNotFoundError, match=r"final\.pt: the weights of model en-de-smoke-x"):
        points.prune_point(absent, data, dataclasses.replace(pc, lam=0.7), "en-de", 1.0, 1, tmp_path)

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
    """`python -m headlib.pruning curve` then `scratches`: the units a Sec. 6 page is computed in."""
    from headlib.pruning import points
    from headlib.pruning.__main__ import main
    from headlib.settings import results_dir
    _, run = smoke_run
    main(["curve", "--profile", "smoke", "--setting", "encoder"])
    out = results_dir("smoke", "en-de", 1) / "pruning"
    checked = json.loads((out / "enc-self-path-validation.json").read_text())
    lams = points.lambda_grid("smoke", "encoder")
    assert [p["lam"] for p in checked["points"]] == points.validation_lambdas(lams) and checked["update_ratio"] == 0.2
    assert [r["lam"] for r in points.points(out, ("enc-self",))] == lams
    main(["scratches", "--profile", "smoke", "--setting", "encoder"])
    baseline = json.loads((run / "results.json").read_text())["steps"]
    plan = points.scratch_plan(points.points(out, ("enc-self",)), points.scratch_head_counts("smoke", "encoder"),
                              baseline, "encoder")
    trained = {(r["mask"], r["steps"]) for r in points.scratch_rows(out)}
    assert set(plan) <= trained
    # each unit's measured minutes, as the Claims page and the study's time list them
    from headlib.book.pages.claims import pruning_units
    units = pruning_units("smoke", "en-de", 1)            # other tests may have added Sec. 6.3 units to this sweep
    steps = [u["step"].split(":")[0].split(" (")[0] for u in units]
    assert [s for s in steps if s.startswith("Sec. 6.2")] == ["Sec. 6.2 path", "Sec. 6.2 validation"]
    assert steps.count("from scratch") == len(points.scratch_rows(out)) and steps[-1] == "from scratch"
    assert all(u["minutes"] >= 0 for u in units) and "--no-validate" in units[0]["command"]


def test_read_only_pages_name_a_missing_record_instead_of_computing_it(tmp_path, monkeypatch):
    """`headlib.book verify` sets HEADLIB_READ_ONLY: a page that finds a record missing stops with its name."""
    from headlib.pruning import points
    from headlib.pruning.prune import PruneConfig
    from headlib.settings import READ_ONLY
    monkeypatch.setenv(READ_ONLY, "1")
    monkeypatch.setattr(points, "prune", lambda *a, **k: pytest.fail("fine-tuned in a read-only run"))
    monkeypatch.setattr(points, "train", lambda *a, **k: pytest.fail("trained in a read-only run"))
    model = Transformer(get_config("smoke").model, 40)
    cfg = PruneConfig(lam=0.1, steps=2)
    with pytest.raises(FileNotFoundError, match=points.point_name(cfg)):
        points.prune_point(model, None, cfg, "en-de", 1.0, 1, tmp_path)
    with pytest.raises(FileNotFoundError, match="scratch-"):
        points.scratch_point("smoke", "en-de", 1, "enc-self:1100/0011", 5, tmp_path)
    with pytest.raises(FileNotFoundError, match="full.json"):
        points.full_point(model, None, "en-de", 1.0, 1, tmp_path)
