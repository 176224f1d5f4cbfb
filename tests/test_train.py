"""Training: the loss, exact resume after an interruption, the finished-run cache."""
import json
import math

import pytest
import torch
from conftest import tiny_model_config

from headlib.config import get_config
from headlib.data.batching import collate
from headlib.data.bpe import PAD_ID
from headlib.nn.model import Transformer
from headlib.train import Trainer, train
from headlib.nn.loss import token_loss
from headlib.train.trainer import average_weights, lr_at

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


@pytest.mark.parametrize("bf16", [False, True], ids=["fp32-cpu-profiles", "bf16-base-profile"])
def test_resume_is_bitwise_identical(tmp_path, bf16):
    cfg = get_config("smoke", RESUME + [f"train.bf16={bf16}"])
    assert cfg.model.dropout > 0                     # the dropout RNG is exercised
    cpu = get_config("cpu")                          # the smoke model on the cpu profile's kernels
    assert (cfg.train.fused_loss, cfg.model.dropout_masks, cfg.train.schedule) == \
        (cpu.train.fused_loss, cpu.model.dropout_masks, cpu.train.schedule)

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


def test_a_users_clock_stops_a_run_and_the_bar_counts_to_max_steps(tmp_path, capsys):
    """`max_minutes` stays a user's option (no profile uses it): it stops the run; the progress
    bar's total is the recipe's number of updates."""
    clocked = get_config("smoke", RESUME + ["train.max_minutes=1e-9"])   # the clock ends it after 1 update
    trainer = Trainer(clocked, tmp_path / "clock", progress=True)
    trainer.fit()
    assert trainer.state["step"] == 1 and trainer.state["stopped"] == "max_minutes"
    assert "1/12 " in capsys.readouterr().err


def test_average_weights(tmp_path):
    torch.manual_seed(0)
    models = [Transformer(tiny_model_config(), 20) for _ in range(3)]
    for i, m in enumerate(models):
        torch.save(m.state_dict(), tmp_path / f"{i}.pt")
    avg = average_weights([tmp_path / f"{i}.pt" for i in range(3)])
    for k, v in avg.items():
        ref = (models[0].state_dict()[k] + models[1].state_dict()[k] + models[2].state_dict()[k]) / 3
        torch.testing.assert_close(v, ref, atol=1e-6, rtol=0)


def test_final_evaluation_adds_no_near_copy_snapshot(tmp_path):
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


def test_lr_schedule():
    cfg = get_config("smoke", ["train.lr=1e-3", "train.warmup=10", "train.schedule=inverse_sqrt"])
    lrs = [lr_at(s, cfg) for s in range(1, 41)]
    assert max(lrs) == pytest.approx(1e-3) and lrs.index(max(lrs)) == 9      # peak at step = warmup
    assert all(a < b for a, b in zip(lrs[:9], lrs[1:10]))                     # linear warmup
    assert lr_at(40, cfg) == pytest.approx(1e-3 * 0.5)                         # 1/sqrt decay
    for step in range(1, 30):                                                  # App. B.3's formula
        assert lr_at(step, cfg) == pytest.approx(1e-3 * min(step / 10, math.sqrt(10 / step)), rel=1e-12)


def test_the_profiles_are_recipes_of_updates_not_minutes():
    """No profile trains against a clock: each is a number of updates, the same on every machine,
    with one precision on every CPU (fp32); the cpu profile's linear decay ends at its last update."""
    from headlib.config import PROFILES
    for cfg in PROFILES.values():
        assert cfg.train.max_minutes == 0 and cfg.train.bf16 == (cfg.profile == "base"), cfg.profile
    cpu = get_config("cpu")
    assert cpu.train.schedule == "linear" and lr_at(cpu.train.max_steps, cpu) == 0.0 < lr_at(cpu.train.max_steps - 1, cpu)


def test_linear_schedule_decays_to_zero_at_max_steps():
    cfg = get_config("smoke", ["train.lr=1e-3", "train.warmup=10", "train.max_steps=30", "train.schedule=linear"])
    assert lr_at(5, cfg) == pytest.approx(0.5e-3)                              # the same warmup
    assert lr_at(10, cfg) == pytest.approx(1e-3)                               # peak
    assert lr_at(20, cfg) == pytest.approx(0.5e-3)                             # half-way from peak to the end
    assert lr_at(30, cfg) == 0.0 and lr_at(35, cfg) == 0.0
    with pytest.raises(ValueError, match="train.schedule"):
        get_config("smoke", ["train.schedule=cosine"])


def test_token_loss_equals_mean_of_per_token_losses():
    torch.manual_seed(0)
    model = Transformer(tiny_model_config(), 20).eval()
    from headlib.data.batching import Encoded
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

    monkeypatch.setattr("headlib.train.trainer.Trainer", no_training)
    assert train(cfg, progress=False) == expected
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == before


def test_smoke_run_results(smoke_run):
    cfg, out = smoke_run
    r = json.loads((out / "results.json").read_text())
    assert r["steps"] == cfg.train.max_steps and r["stopped"] == "max_steps"
    assert set(r["test"]) == {"test_2016_flickr", "test_2017_flickr", "test_2017_mscoco"}
    assert r["test"]["test_2016_flickr"]["beam"]["n"] == 1000
    assert [h["step"] for h in r["history"]] == [15, 30]
    for h in r["history"]:   # the encoder heads' statistics at each evaluation (Sec. 5 over training)
        stats, (L, H) = h["heads"], (cfg.model.enc_layers, cfg.model.n_heads)
        assert stats["sentences"] == min(cfg.train.head_stats_sentences, cfg.data.dev_limit)
        assert torch.tensor(stats["confidence"]).shape == torch.tensor(stats["rare_rate"]).shape == (L, H)
        shares = torch.tensor(stats["offset_share"])
        assert shares.shape == (L, H, 5) and bool((shares.sum(-1) <= 1 + 1e-3).all())
    assert r["chosen_weights"] in ("best", "averaged")
    for name in ("final.pt", "best.pt", "last.pt", "bpe.json"):
        assert (out / name).is_file()
    assert len(list(out.glob("snap-*.pt"))) == cfg.train.average_last
    assert not list(out.glob(".*.tmp"))
    # the run lives under HEADLIB_ARTIFACTS, not in the repository
    from headlib.files import artifacts_dir
    assert out.is_relative_to(artifacts_dir())


def test_a_runs_cache_key_is_its_config_and_the_results_version(monkeypatch):
    """Renaming the package version keeps a run; bumping the results version (code that changes
    numbers) or changing a field retrains it; the thread count changes speed, not results."""
    import headlib
    from headlib.train import run_dir
    cfg = get_config("cpu")
    name = run_dir(cfg).name
    assert run_dir(get_config("cpu", ["train.threads=1"])).name == name
    assert run_dir(get_config("cpu", ["train.seed=2"])).name != name
    monkeypatch.setattr(headlib, "__version__", "9.9.9")
    assert run_dir(cfg).name == name
    monkeypatch.setattr("headlib.train.runs.RESULTS_VERSION", headlib.RESULTS_VERSION + 1)
    assert run_dir(cfg).name != name


def test_record_digest_ignores_the_clock_and_the_machine():
    """A record's digest (what pages are keyed by) covers what the run learned and scored, not how
    fast or where: the same run on a slower machine has the same digest."""
    from headlib.train.machine import machine
    from headlib.train.records import record_digest
    here = machine()
    assert {"torch", "device"} <= set(here)
    if here["device"] == "cpu":
        assert here["bf16"] in ("amx_bf16", "avx512_bf16", "none") and here["threads"] >= 1
    run = {"steps": 7, "train_minutes": 45.0, "history": [{"step": 7, "minutes": 45.0, "dev_bleu": 1.0}],
           "machine": here}
    slower = json.loads(json.dumps(run)) | {"train_minutes": 80.0, "machine": dict(here, torch="0.0.1")}
    slower["history"][0]["minutes"] = 80.0
    assert record_digest(slower) == record_digest(run)
    slower["history"][0]["dev_bleu"] = 1.5
    assert record_digest(slower) != record_digest(run)


def test_a_bad_checkpoint_is_one_line_naming_the_file(tmp_path, smoke_run):
    """A missing, truncated or corrupt checkpoint, one of another config and one of another
    results version: each a `CheckpointError` (a ValueError, so the command line prints one
    line) that names the file and what is wrong, never a traceback from deep inside torch. A
    checkpoint of the same run under another thread count, or written before checkpoints
    recorded their results version, resumes."""
    import re
    import shutil

    from conftest import run_cli

    from headlib import RESULTS_VERSION
    from headlib.files import CheckpointError
    from headlib.train import load_model
    cfg, out = smoke_run
    at = lambda path, text: re.escape(f"{path}: {text}")
    with pytest.raises(CheckpointError, match=at(tmp_path / "none.pt", "no trained model")):
        load_model(tmp_path / "none.pt")
    whole = (out / "final.pt").read_bytes()
    shutil.copyfile(out / "bpe.json", tmp_path / "bpe.json")
    for name, data in (("truncated.pt", whole[: len(whole) // 2]), ("corrupt.pt", b"\x00not a checkpoint" * 50)):
        (tmp_path / name).write_bytes(data)
        with pytest.raises(CheckpointError, match=at(tmp_path / name, "not a readable trained model; the file is "
                                                     "truncated or corrupt")):
            load_model(tmp_path / name)
    (tmp_path / "a.en").write_text("A dog .\n")
    (tmp_path / "b.de").write_text("Ein Hund .\n")
    proc = run_cli("evaluate", "--checkpoint", str(tmp_path / "truncated.pt"), "--src", str(tmp_path / "a.en"),
                   "--ref", str(tmp_path / "b.de"), check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    [line] = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    # the user's own file: what it is not, and no advice to delete it (a cache's error gives that)
    assert line.startswith(f"error: {tmp_path / 'truncated.pt'}: not a trained model saved by torch.save (a truncated")
    assert "delete" not in line

    run = get_config("smoke", RESUME)
    Trainer(run, tmp_path / "run", progress=False).fit(stop_after=2)
    last = tmp_path / "run" / "last.pt"
    assert Trainer(get_config("smoke", RESUME[:-1] + ["train.threads=2"]), tmp_path / "run", progress=False).state["step"] == 2
    with pytest.raises(CheckpointError, match=at(last, "a training checkpoint of another config (differs in train.lr)")):
        Trainer(get_config("smoke", RESUME + ["train.lr=1e-4"]), tmp_path / "run", progress=False)
    saved = torch.load(last, weights_only=False)
    torch.save({k: v for k, v in saved.items() if k != "results_version"}, last)      # written by older code
    assert Trainer(run, tmp_path / "run", progress=False).state["step"] == 2
    torch.save(saved | {"results_version": RESULTS_VERSION - 1}, last)
    with pytest.raises(CheckpointError, match=at(last, f"a training checkpoint of results version {RESULTS_VERSION - 1}")):
        Trainer(run, tmp_path / "run", progress=False)
