"""Pruning by fine-tuning: decoder untouched in encoder-only pruning; masks installed; lambda works."""
import dataclasses

import pytest
import torch

from headlib.config import get_config
from headlib.nn.model import Transformer
from headlib.pruning.gates import HardConcreteGates
from headlib.pruning.prune import PruneConfig, Pruning, prune, prune_path
from headlib.train import prepare_data


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    import os
    os.environ.setdefault("HEADLIB_ARTIFACTS", str(tmp_path_factory.mktemp("artifacts")))
    cfg = get_config("smoke")
    data = prepare_data(cfg)
    torch.manual_seed(0)
    return Transformer(cfg.model, data.bpe.vocab_size), data


@pytest.mark.parametrize("bf16", [False, True])   # fp32 (the default) and the bf16 autocast path
def test_encoder_only_pruning_leaves_decoder_bitwise_unchanged(smoke, bf16):
    model, data = smoke
    before = {k: v.clone() for k, v in model.state_dict().items()}
    pruned, result = prune(model, data, PruneConfig(kinds=("enc-self",), lam=0.05, steps=6, bf16=bf16))
    after = pruned.state_dict()
    changed = [k for k in before if not k.startswith("head_mask") and not torch.equal(before[k], after[k])]
    assert changed and all(k.startswith(("encoder.", "enc_norm.")) for k in changed), changed
    assert set(result.masks) == {"enc-self"}
    # the installed mask is the learned gates' hard mask: with the default stretch (-0.1, 1.1),
    # symmetric about 1/2, P(g = 1) > P(g = 0) exactly where log_alpha > 0
    assert torch.equal(pruned.head_mask("enc-self"), (result.scores["enc-self"] > 0).float())
    assert torch.equal(pruned.head_mask("dec-self"), torch.ones_like(pruned.head_mask("dec-self")))
    # the original model is not modified
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in before.items())


def test_larger_lambda_closes_more_heads(smoke):
    model, data = smoke
    kinds = ("enc-self", "dec-self", "dec-enc")
    _, weak = prune(model, data, PruneConfig(kinds=kinds, lam=0.0, steps=40, gate_lr=0.1))
    _, strong = prune(model, data, PruneConfig(kinds=kinds, lam=5.0, steps=40, gate_lr=0.1))
    assert sum(strong.retained().values()) < sum(weak.retained().values())
    # with lambda = 0 only the cross-entropy moves the gates: they reach the loss, head by head
    torch.manual_seed(PruneConfig().seed)      # prune() seeds before drawing the gates' init
    init = HardConcreteGates({k: tuple(model.head_mask(k).shape) for k in kinds}).scores()
    moved = torch.cat([(weak.scores[k] - init[k]).abs().flatten() for k in kinds])
    assert moved.min() > 0 and moved.std() > 0.1 * moved.mean(), moved


def test_dsp_keeps_exactly_k_heads_over_all_kinds(smoke):
    model, data = smoke
    kinds = ("enc-self", "dec-enc")
    pruned, result = prune(model, data, PruneConfig(kinds=kinds, method="dsp", k=3, steps=8))
    assert sum(result.retained().values()) == 3
    logits = torch.cat([result.scores[k].flatten() for k in kinds])
    kept = torch.cat([result.masks[k].flatten() for k in kinds]).bool()
    assert logits[kept].min() >= logits[~kept].max()          # the hard mask is the top-3 logits
    assert all(torch.equal(pruned.head_mask(k), result.masks[k]) for k in kinds)


def test_fixed_mask_is_kept_and_only_the_encoder_trains(smoke):
    model, data = smoke
    n_layers, n_heads = model.head_mask("enc-self").shape
    rows = ["1" + "0" * (n_heads - 1)] * n_layers
    spec = "enc-self:" + "/".join(rows)
    before = {k: v.clone() for k, v in model.state_dict().items() if k.startswith("decoder.")}
    pruned, result = prune(model, data, PruneConfig(method="fixed", mask=spec, label="first", steps=4))
    assert result.retained() == {"enc-self": n_layers} and result.scores == {}
    assert torch.equal(pruned.head_mask("enc-self")[:, 0], torch.ones(n_layers))
    assert all(torch.equal(v, pruned.state_dict()[k]) for k, v in before.items())
    with pytest.raises(ValueError, match="must name every pruned kind"):
        prune(model, data, PruneConfig(kinds=("dec-self",), method="fixed", mask=spec, steps=1))


def _same_weights(a, b) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))


def test_the_continuation_path_warm_starts_each_lambda_from_the_previous_gated_model(smoke):
    """Its first point is the independent fine-tuning at that lambda, bitwise; its second is that
    fine-tuning continued at the next lambda, as if no point had been taken in between."""
    model, data = smoke
    cfg = PruneConfig(kinds=("enc-self",), steps=20, gate_lr=0.1)
    lams = (0.0, 5.0)
    path = list(prune_path(model, data, cfg, lams))
    assert [lam for lam, _, _ in path] == list(lams)
    alone, alone_result = prune(model, data, dataclasses.replace(cfg, lam=lams[0]))
    (_, first, first_result), (_, second, second_result) = path
    assert _same_weights(first, alone) and torch.equal(first_result.scores["enc-self"], alone_result.scores["enc-self"])

    run = Pruning(model, data, cfg)                       # the same fine-tuning, without the snapshot
    run.train(cfg.steps, lams[0])
    run.train(cfg.steps, lams[1])
    continued, _ = run.snapshot()
    assert _same_weights(second, continued)
    assert sum(second_result.retained().values()) < sum(first_result.retained().values())   # lambda 5 closes heads
    assert second_result.history[-1]["step"] == 2 * cfg.steps - 1 and second_result.history[-1]["lam"] == lams[1]
    with pytest.raises(ValueError, match="method must be hard-concrete"):
        next(prune_path(model, data, PruneConfig(method="dsp", k=3), lams))
