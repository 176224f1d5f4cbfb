"""Training: the loss, exact resume after an interruption, the finished-run cache."""
import json
import math

import pytest
import torch

from headlib.batching import collate
from headlib.bpe import PAD_ID
from headlib.config import get_config
from headlib.model import Transformer
from headlib.train import Trainer, average_weights, lr_at, token_loss, train

from conftest import tiny_model_config

RESUME = ["train.max_steps=12", "train.eval_every=4", "train.save_every=2", "train.accum=2",
          "data.dev_limit=8", "train.threads=1"]


def assert_same_tree(a, b, path="state"):
    """Bitwise equality of nested dicts/lists of tensors and plain values."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b), path
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            assert_same_tree(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same_tree(x, y, f"{path}[{i}]")
    else:
        assert a == b, path


def comparable(state):
    """Trainer state without wall-clock fields."""
    s = {k: v for k, v in state.items() if k != "elapsed"}
    s["history"] = [{k: v for k, v in h.items() if k != "minutes"} for h in state["history"]]
    return s


def assert_same_run(full, resumed, tmp_path):
    """The resumed trainer (in tmp_path/resumed) ends bitwise where the uninterrupted one (in
    tmp_path/full) does: model, optimizer, trainer state and every checkpoint file."""
    assert_same_tree(full.model.state_dict(), resumed.model.state_dict(), "model")
    assert_same_tree(full.opt.state_dict(), resumed.opt.state_dict(), "optimizer")
    assert_same_tree(comparable(full.state), comparable(resumed.state))
    for name in ["best.pt", "last.pt", *full.state["snapshots"]]:
        a = torch.load(tmp_path / "full" / name, weights_only=False)
        b = torch.load(tmp_path / "resumed" / name, weights_only=False)
        if name == "last.pt":
            a, b = a["model"], b["model"]
        assert_same_tree(a, b, name)


# The cpu profile's training path on the smoke model: fp32, fused loss, int16 dropout masks, linear decay.
CPU_PATH = ["train.bf16=false", "train.fused_loss=true", "model.dropout_masks=int16", "train.schedule=linear"]


@pytest.mark.parametrize("path", [[], CPU_PATH], ids=["bf16", "cpu-profile-path"])
def test_resume_is_bitwise_identical(tmp_path, path):
    cfg = get_config("smoke", RESUME + path)
    assert cfg.model.dropout > 0                     # the dropout RNG is exercised
    assert cfg.train.bf16 != bool(path)              # the bf16 fast path, or the cpu profile's fp32 one

    full = Trainer(cfg, tmp_path / "full", progress=False)
    n_groups = len(full._groups(0))
    k = 6
    assert 0 < k < n_groups < cfg.train.max_steps      # interrupted mid-epoch; the rest crosses an epoch
    assert k % cfg.train.save_every == 0 and k % cfg.train.eval_every != 0
    full.fit()
    assert full.state["step"] == 12 and full.state["epoch"] == 1 and full.state["stopped"] == "max_steps"

    first = Trainer(cfg, tmp_path / "resumed", progress=False)
    first.fit(stop_after=k)
    saved = torch.load(tmp_path / "resumed" / "last.pt", weights_only=False)
    assert saved["state"]["step"] == k and saved["state"]["epoch"] == 0 and saved["state"]["pos"] == k
    assert len(saved["state"]["history"]) == 1              # the evaluation at step 4
    # the interrupted model is not the finished one
    assert not all(torch.equal(a, b) for a, b in zip(first.model.state_dict().values(),
                                                     full.model.state_dict().values()))
    del first

    second = Trainer(cfg, tmp_path / "resumed", progress=False)  # a new process would do the same
    assert second.state["step"] == k
    second.fit()

    assert_same_run(full, second, tmp_path)


def test_resume_after_an_interruption_between_save_points_is_bitwise_identical(tmp_path):
    """A crash between two `last` checkpoints loses the updates since the last one, and an
    evaluation made after it (its best.pt and snapshot are on disk, not in the saved state): the
    resumed run redoes them and ends bitwise where the uninterrupted run ends."""
    cfg = get_config("smoke", RESUME + ["train.save_every=3", "train.average_last=4"])
    k = 5                                               # saved at 3, evaluated at 4, crashed at 5
    assert k % cfg.train.save_every and (k - 1) % cfg.train.eval_every == 0

    full = Trainer(cfg, tmp_path / "full", progress=False)
    assert k < len(full._groups(0)) < cfg.train.max_steps
    full.fit()
    assert full.state["step"] == 12 and full.state["stopped"] == "max_steps"
    assert full.state["snapshots"] == ["snap-0000004.pt", "snap-0000008.pt", "snap-0000012.pt"]

    first = Trainer(cfg, tmp_path / "resumed", progress=False)
    first.fit(stop_after=k)
    assert first.state["step"] == k
    saved = torch.load(tmp_path / "resumed" / "last.pt", weights_only=False)
    assert saved["state"]["step"] == 3 and saved["state"]["pos"] == 3
    assert saved["state"]["history"] == [] and saved["state"]["snapshots"] == []
    assert (tmp_path / "resumed" / "snap-0000004.pt").is_file() and (tmp_path / "resumed" / "best.pt").is_file()
    del first

    second = Trainer(cfg, tmp_path / "resumed", progress=False)
    assert second.state["step"] == 3                    # updates 4 and 5 are lost and redone
    second.fit()

    assert_same_run(full, second, tmp_path)
    assert sorted(p.name for p in (tmp_path / "resumed").glob("snap-*.pt")) == full.state["snapshots"]


def test_early_stopping_after_patience_evaluations_without_a_new_best(tmp_path):
    """lr=0: the weights, so the dev BLEU, never change. The first evaluation sets the best; each
    later one is not better (equal is not better), and the run stops at the `patience`-th of those,
    well before max_steps."""
    cfg = get_config("smoke", ["train.lr=0", "train.eval_every=1", "train.patience=2", "train.max_steps=10",
                               "data.dev_limit=8", "train.threads=1"])
    trainer = Trainer(cfg, tmp_path / "run", progress=False)
    init = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    state = trainer.fit()
    assert state["stopped"] == "early stopping"
    assert state["step"] == 3                            # best at 1, no better at 2 and 3
    assert [h["step"] for h in state["history"]] == [1, 2, 3]
    assert len({h["dev_bleu"] for h in state["history"]}) == 1
    assert state["best_bleu"] == state["history"][0]["dev_bleu"] and state["bad_evals"] == 2
    assert_same_tree(init, trainer.model.state_dict(), "model")   # lr=0 really froze the weights
    saved = torch.load(tmp_path / "run" / "last.pt", weights_only=False)
    assert saved["state"]["step"] == 3 and saved["state"]["stopped"] == "early stopping"


def _grads_at_first_update(cfg, out):
    """The gradients the optimizer steps with at the first update (after any clipping)."""
    trainer = Trainer(cfg, out, progress=False)
    seen = []
    step = trainer.opt.step

    def spy(*a, **k):
        seen.append([p.grad.detach().clone() for p in trainer.model.parameters()])
        return step(*a, **k)

    trainer.opt.step = spy
    trainer.fit()
    assert len(seen) == 1
    return seen[0]


def test_gradient_clipping_rescales_the_whole_gradient_to_clip_norm(tmp_path):
    """clip_norm rescales the gradient of the whole update (all micro-batches, all parameters
    together) to norm clip_norm when it is larger, keeping its direction; a large clip_norm leaves it
    bitwise as it is."""
    base = ["train.max_steps=1", "train.accum=2", "data.dev_limit=8", "train.threads=1"]
    raw = _grads_at_first_update(get_config("smoke", base + ["train.clip_norm=0"]), tmp_path / "raw")
    norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in raw]))
    c = 1e-3
    assert norm > 10 * c
    clipped = _grads_at_first_update(get_config("smoke", base + [f"train.clip_norm={c}"]), tmp_path / "clipped")
    total = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in clipped]))
    assert total.item() == pytest.approx(c, rel=1e-4)
    for g, r in zip(clipped, raw):
        torch.testing.assert_close(g, r * (c / norm), rtol=1e-4, atol=1e-12)
    loose = _grads_at_first_update(get_config("smoke", base + [f"train.clip_norm={1e3 * norm.item()}"]),
                                   tmp_path / "loose")
    assert_same_tree(loose, raw, "grads")


def test_clock_stopped_run_is_replayed_to_its_committed_updates(tmp_path, artifacts_tmp, capsys):
    """A run the clock stopped is retrained (on a fresh machine) to the committed number of updates,
    not to whatever its own clock allows: bitwise the run limited to that many updates. The progress
    bar shows the clock's time left, or the replay's last update."""
    from headlib.results import results_dir
    from headlib.train import committed_steps, run_dir
    clocked = get_config("smoke", RESUME + ["train.max_minutes=1e-9"])   # the clock ends it after 1 update
    own_clock = Trainer(clocked, tmp_path / "clock", progress=True)
    own_clock.fit()
    assert own_clock.state["step"] == 1 and own_clock.state["stopped"] == "max_minutes"
    assert "1it " in capsys.readouterr().err                             # no made-up total

    assert committed_steps(clocked) == 0                                  # nothing committed yet
    committed = results_dir("smoke", "en-de", clocked.train.seed) / "training_results.json"
    for run, stopped, expected in [("other-run", "max_minutes", 0), (run_dir(clocked).name, "max_steps", 0),
                                   (run_dir(clocked).name, "max_minutes", 7)]:
        committed.write_text(json.dumps({"run_dir": run, "stopped": stopped, "steps": 7}))
        assert committed_steps(clocked) == expected

    replayed = Trainer(clocked, tmp_path / "replay", progress=True, replay_steps=committed_steps(clocked))
    replayed.fit()
    assert replayed.state["step"] == 7 and replayed.state["stopped"] == "max_minutes"
    assert "7/7 " in capsys.readouterr().err
    limited = Trainer(get_config("smoke", RESUME + ["train.max_steps=7"]), tmp_path / "limited", progress=False)
    limited.fit()
    assert_same_tree(limited.model.state_dict(), replayed.model.state_dict(), "model")


def test_average_weights(tmp_path):
    torch.manual_seed(0)
    models = [Transformer(tiny_model_config(), 20) for _ in range(3)]
    for i, m in enumerate(models):
        torch.save(m.state_dict(), tmp_path / f"{i}.pt")
    avg = average_weights([tmp_path / f"{i}.pt" for i in range(3)])
    for k, v in avg.items():
        ref = (models[0].state_dict()[k] + models[1].state_dict()[k] + models[2].state_dict()[k]) / 3
        torch.testing.assert_close(v, ref, atol=1e-6, rtol=0)


def test_final_evaluation_adds_no_near_copy_snapshot_unless_a_replayed_run_did(tmp_path):
    """A run stopped one update after an evaluation: the final weights are evaluated (for best)
    but do not enter the average as a second copy of the last snapshot."""
    from headlib.train import finalize
    cfg = get_config("smoke", ["train.max_steps=9", "train.eval_every=4", "train.average_last=3",
                               "data.dev_limit=8", "train.threads=1"])
    trainer = Trainer(cfg, tmp_path / "run", progress=False)
    trainer.fit()
    results = finalize(trainer)
    assert [h["step"] for h in results["history"]] == [4, 8, 9]
    assert trainer.state["snapshots"] == ["snap-0000004.pt", "snap-0000008.pt"]
    assert results["averaged_snapshots"] == [4, 8]

    # A replay of a committed run that did average the weights at its stop (a record written under
    # the earlier rule) averages the same snapshots: 4, 8 and the weights of update 9.
    replay = Trainer(cfg, tmp_path / "replay", progress=False, replay_snapshots=[4, 8, 9])
    replay.fit()
    assert finalize(replay)["averaged_snapshots"] == [4, 8, 9]
    at_stop = torch.load(tmp_path / "run" / "last.pt", weights_only=False)["model"]
    assert_same_tree(torch.load(tmp_path / "replay" / "snap-0000009.pt"), at_stop, "snapshot at the stop")


def test_lr_schedule():
    cfg = get_config("smoke", ["train.lr=1e-3", "train.warmup=10"])
    lrs = [lr_at(s, cfg) for s in range(1, 41)]
    assert max(lrs) == pytest.approx(1e-3) and lrs.index(max(lrs)) == 9      # peak at step = warmup
    assert all(a < b for a, b in zip(lrs[:9], lrs[1:10]))                     # linear warmup
    assert lr_at(40, cfg) == pytest.approx(1e-3 * 0.5)                         # 1/sqrt decay


# The cpu profile's inverse-sqrt recipe before the 45-minute linear one; its runs are still committed.
CPU_INVERSE_SQRT = ["train.schedule=inverse_sqrt", "train.lr=1e-3", "train.warmup=400"]


@pytest.mark.parametrize("profile,overrides", [("smoke", []), ("base", []), ("cpu", CPU_INVERSE_SQRT)])
def test_inverse_sqrt_schedule_is_bitwise_the_committed_runs_formula(profile, overrides):
    """The committed runs were trained with lr * min(step / warmup, sqrt(warmup / step)); a replay
    is bitwise only if every learning rate has the same rounding (a rewrite as (lr * step) / warmup
    changed a quarter of the cpu profile's warmup steps in the last bit)."""
    cfg = get_config(profile, overrides)
    lr, warmup = cfg.train.lr, cfg.train.warmup
    for step in range(1, 3 * warmup):
        assert lr_at(step, cfg) == lr * min(step / warmup, math.sqrt(warmup / step)), step


def test_the_linear_schedule_warms_up_with_the_same_rounding():
    cfg = get_config("cpu")
    assert cfg.train.schedule == "linear_clock"
    lr, warmup = cfg.train.lr, cfg.train.warmup
    for step in range(1, warmup + 1):
        assert lr_at(step, cfg) == lr * (step / warmup), step


def test_linear_schedule_decays_to_zero_at_max_steps():
    cfg = get_config("smoke", ["train.lr=1e-3", "train.warmup=10", "train.max_steps=30", "train.schedule=linear"])
    assert lr_at(5, cfg) == pytest.approx(0.5e-3)                              # the same warmup
    assert lr_at(10, cfg) == pytest.approx(1e-3)                               # peak
    assert lr_at(20, cfg) == pytest.approx(0.5e-3)                             # half-way from peak to the end
    assert lr_at(30, cfg) == 0.0 and lr_at(35, cfg) == 0.0
    with pytest.raises(ValueError, match="train.schedule"):
        get_config("smoke", ["train.schedule=cosine"])


def test_the_clock_schedule_re_aims_its_linear_decay_at_each_horizon():
    from dataclasses import replace
    cfg = get_config("smoke", ["train.lr=1e-3", "train.warmup=10", "train.max_steps=100",
                               "train.schedule=linear_clock"])
    linear = replace(cfg, train=replace(cfg.train, schedule="linear"))
    assert all(lr_at(s, cfg) == lr_at(s, linear) for s in range(1, 120))   # no horizon yet: linear to max_steps
    horizons = [[10, 50], [30, 40]]
    assert lr_at(10, cfg, horizons) == 1e-3                     # an update at a horizon's own step keeps the old line
    assert lr_at(20, cfg, horizons) == pytest.approx(1e-3 * 30 / 40)   # after 10: from 1e-3 to 0 at 50
    assert lr_at(30, cfg, horizons) == pytest.approx(0.5e-3)
    assert lr_at(35, cfg, horizons) == pytest.approx(0.25e-3)  # after 30: from 0.5e-3 (reached there) to 0 at 40
    assert lr_at(40, cfg, horizons) == 0.0 and lr_at(60, cfg, horizons) == 0.0
    assert lr_at(20, linear, horizons) == lr_at(20, linear)     # the other schedules have no horizons


def test_clock_horizon_is_where_the_budget_runs_out_at_the_pace_so_far():
    from headlib.train import clock_horizon
    cfg = get_config("smoke", ["train.max_minutes=3", "train.max_steps=1000"])
    assert clock_horizon(100, 60.0, cfg) == 300                 # 120 s left at 100 updates a minute
    assert clock_horizon(100, 60.0, get_config("smoke", ["train.max_minutes=3", "train.max_steps=250"])) == 250
    assert clock_horizon(100, 200.0, cfg) == 101                # over budget: the next update


@pytest.mark.parametrize("bf16,if_fast,device,cpu_bf16,expected", [
    (True, False, "cpu", "none", True), (False, True, "cuda", "amx_bf16", False),
    (True, True, "cpu", "amx_bf16", True), (True, True, "cpu", "avx512_bf16", False),
    (True, True, "cpu", "none", False), (True, True, "cuda", "none", True)])
def test_bf16_if_fast_autocasts_only_on_a_gpu_or_a_cpu_with_amx(monkeypatch, bf16, if_fast, device, cpu_bf16, expected):
    import headlib.train as train_module
    monkeypatch.setattr(train_module, "cpu_bf16", lambda: cpu_bf16)
    cfg = get_config("smoke", [f"train.bf16={bf16}", f"train.bf16_if_fast={if_fast}"])
    assert train_module.uses_bf16(cfg, torch.device(device)) is expected


class FakeClock:
    """time.time() for headlib.train: one second later at every call."""

    def __init__(self):
        self.now = 0.0

    def time(self):
        self.now += 1.0
        return self.now


def test_a_clock_scheduled_run_stops_at_its_horizon_and_replays_bitwise(tmp_path, monkeypatch):
    """linear_clock aims its decay at the update where the budget runs out, re-estimated at each
    evaluation after warmup; the run stops when the rate reaches 0. A replay that follows the
    recorded horizons and update count (a fresh machine, another clock) is bitwise the same run."""
    import headlib.train as train_module
    from headlib.train import committed_horizons, finalize, run_dir
    from headlib.results import results_dir
    cfg = get_config("smoke", ["train.schedule=linear_clock", "train.max_minutes=0.5", "train.max_steps=1000",
                               "train.warmup=4", "train.eval_every=4", "train.patience=100",
                               "data.dev_limit=8", "train.threads=1"])
    with monkeypatch.context() as m:
        m.setattr(train_module, "time", FakeClock())
        clocked = Trainer(cfg, tmp_path / "clock", progress=False)
        clocked.fit()
    s = clocked.state
    assert s["stopped"] == "max_minutes" and s["step"] < 30                  # ~1 s an update: under 30 updates
    assert [h[0] for h in s["horizons"]] == list(range(4, s["step"] + 1, 4))  # one per evaluation
    assert s["step"] == s["horizons"][-1][1] and lr_at(s["step"], cfg, s["horizons"]) == 0.0
    assert lr_at(s["step"] - 1, cfg, s["horizons"]) > 0

    trained = {k: v.clone() for k, v in clocked.model.state_dict().items()}   # finalize loads the chosen weights
    results = finalize(clocked)
    assert results["lr_horizons"] == s["horizons"]
    committed = results_dir("smoke", "en-de", cfg.train.seed) / "training_results.json"
    committed.parent.mkdir(parents=True, exist_ok=True)
    committed.write_text(json.dumps(results | {"run_dir": run_dir(cfg).name}))
    assert committed_horizons(cfg) == s["horizons"]

    replay = Trainer(cfg, tmp_path / "replay", progress=False, replay_steps=s["step"],
                     horizons=committed_horizons(cfg))
    replay.fit()
    assert replay.state["horizons"] == s["horizons"] and replay.state["step"] == s["step"]
    assert_same_tree(trained, replay.model.state_dict(), "model")
    committed.unlink()


def test_a_run_given_its_baselines_horizons_follows_the_baselines_rates(tmp_path):
    """A run from scratch or a lottery ticket trains without a clock, to its baseline's updates;
    given the baseline's horizons it updates with the baseline's learning rates, not a decay to its
    own max_steps."""
    cfg = get_config("smoke", ["train.schedule=linear_clock", "train.warmup=4", "train.max_steps=10",
                               "train.eval_every=5", "data.dev_limit=8", "train.threads=1"])
    horizons = [[4, 14], [8, 11]]
    trainer = Trainer(cfg, tmp_path / "run", progress=False, horizons=horizons)
    rates, step = [], trainer.opt.step

    def recording_step(*args, **kwargs):
        rates.append(trainer.opt.param_groups[0]["lr"])
        return step(*args, **kwargs)

    trainer.opt.step = recording_step
    trainer.fit()
    assert rates == [lr_at(i, cfg, horizons) for i in range(1, 11)]
    assert rates[8] != lr_at(9, cfg)                                     # not the decay to max_steps


def test_token_loss_equals_mean_of_per_token_losses():
    torch.manual_seed(0)
    model = Transformer(tiny_model_config(), 20).eval()
    from headlib.batching import Encoded
    data = Encoded([[5, 6, 7], [8, 9]], [[10, 11], [12, 13, 14, 15]])
    src, tgt_in, tgt_out = collate(data, [0, 1])
    loss, n = token_loss(model, src, tgt_in, tgt_out, 0.1)
    assert n == 2 + 1 + 4 + 1
    with torch.no_grad():
        logp = model(src, tgt_in).log_softmax(-1)
    ref = 0.0
    for b in range(2):
        for t in range(tgt_out.size(1)):
            y = int(tgt_out[b, t])
            if y != PAD_ID:   # label smoothing: 0.9 on the reference + 0.1 spread over the vocabulary
                ref += -(0.9 * logp[b, t, y] + 0.1 * logp[b, t].mean())
    assert loss.item() == pytest.approx(float(ref), rel=1e-5)


def test_finished_run_is_read_from_cache(smoke_run, monkeypatch):
    cfg, out = smoke_run
    before = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    expected = json.loads((out / "results.json").read_text())

    def no_training(*a, **k):
        raise AssertionError("a finished run must not be retrained")

    monkeypatch.setattr("headlib.train.Trainer", no_training)
    assert train(cfg, progress=False) == expected
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == before


def test_smoke_run_results(smoke_run):
    cfg, out = smoke_run
    r = json.loads((out / "results.json").read_text())
    assert r["steps"] == cfg.train.max_steps and r["stopped"] == "max_steps"
    assert set(r["test"]) == {"test_2016_flickr", "test_2017_flickr", "test_2017_mscoco"}
    assert r["test"]["test_2016_flickr"]["beam"]["n"] == 1000
    assert [h["step"] for h in r["history"]] == [15, 30]
    assert r["chosen_weights"] in ("best", "averaged")
    for name in ("final.pt", "best.pt", "last.pt", "bpe.json"):
        assert (out / name).is_file()
    assert len(list(out.glob("snap-*.pt"))) == cfg.train.average_last
    assert not list(out.glob(".*.tmp"))
    # the run lives under HEADLIB_ARTIFACTS, not in the repository
    from headlib.files import artifacts_dir
    assert out.is_relative_to(artifacts_dir())


def test_the_committed_runs_keep_their_names():
    """Fields added to the config later (at their defaults) must not rename the committed runs: a
    fresh machine replays each under its run directory (and bitwise, with the reference kernels)."""
    from headlib import __version__
    from headlib.config import Config, DataConfig, ModelConfig, TrainConfig
    from headlib.results import results_dir
    from headlib.train import run_dir
    records = sorted(results_dir("cpu", "en-de", 1).parent.parent.glob("*/seed*/training_results.json"))
    assert len(records) >= 6
    for path in records:
        record = json.loads(path.read_text())
        c = record["config"]
        cfg = Config(profile=c["profile"], model=ModelConfig(**c["model"]), data=DataConfig(**c["data"]),
                     train=TrainConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in c["train"].items()}))
        assert f"{record['pair']}-{cfg.profile}-{cfg.digest(__version__)}" == record["run_dir"], path
    en_de = json.loads(records[0].read_text())                       # en-de/seed1: the default study's run
    assert run_dir(get_config("cpu", pair="en-de")).name == en_de["run_dir"]


def test_record_digest_ignores_later_fields_at_their_defaults():
    """A replay writes every config field; the committed record predates some of them. At their
    defaults they leave the digest (so page keys) unchanged; at other values they change it."""
    from headlib.train import record_digest
    committed = {"steps": 7, "train_minutes": 45.0, "history": [{"step": 7, "minutes": 45.0, "dev_bleu": 1.0}],
                 "config": {"model": {"d_model": 16}, "train": {"lr": 1e-3}, "profile": "smoke"}}
    replay = json.loads(json.dumps(committed))
    replay["train_minutes"], replay["history"][0]["minutes"] = 80.0, 80.0
    replay["config"]["model"] |= {"dropout_masks": "float32", "positions": "interleaved"}
    replay["config"]["train"]["fused_loss"] = False
    assert record_digest(replay) == record_digest(committed)
    replay["config"]["train"]["fused_loss"] = True
    assert record_digest(replay) != record_digest(committed)


def test_a_replay_says_when_it_cannot_be_bitwise():
    """The record names the machine's kernels; a replay elsewhere warns, and the record digest
    ignores the machine (a bitwise replay on another machine is the same run)."""
    from headlib.train import machine, record_digest, replay_warning
    here = machine()
    assert {"torch", "device"} <= set(here)
    if here["device"] == "cpu":
        assert here["bf16"] in ("amx_bf16", "avx512_bf16", "none") and here["threads"] >= 1
    assert replay_warning({"machine": dict(here)}, here) is None
    other = dict(here, torch="0.0.1")
    warning = replay_warning({"machine": other}, here)
    assert "torch: 0.0.1 then" in warning and "not be bitwise" in warning
    assert "does not say which machine" in replay_warning({}, here)
    assert record_digest({"steps": 3, "machine": other}) == record_digest({"steps": 3, "machine": here}) \
        == record_digest({"steps": 3})
