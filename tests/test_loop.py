"""The one fine-tuning loop (`headlib.train.loop.fine_tune`) against the loop written out by hand
as its docstring states it, and the callers that must go through it."""
import copy
from dataclasses import replace

import torch

from headlib.config import get_config
from headlib.data.batching import Encoded, batch_stream
from headlib.nn.loss import token_loss
from headlib.nn.model import Transformer
from headlib.pruning.gates import HardConcreteGates
from headlib.train.loop import Update, fine_tune, one_batch_updates

VOCAB = 40


def toy(seed=0, dropout=0.1):
    torch.manual_seed(seed)
    data = Encoded([[int(t) for t in torch.randint(4, VOCAB, (int(n),))] for n in torch.randint(3, 9, (24,))],
                   [[int(t) for t in torch.randint(4, VOCAB, (int(n),))] for n in torch.randint(3, 9, (24,))])
    model = Transformer(replace(get_config("smoke").model, dropout=dropout), VOCAB).train()   # dropout: the RNG is used
    return model, data


def by_hand(model, opt, batches, gates, weight, clip_norm, masks, steps):
    """The textbook loop: per batch, zero the gradients, mean token loss plus weight * penalty,
    backward, mask the gradients, clip, step."""
    for _, (src, tgt_in, tgt_out) in zip(range(steps), batches):
        opt.zero_grad(set_to_none=True)
        loss, n = token_loss(model, src, tgt_in, tgt_out, 0.1, gates=gates())
        (loss / n + weight * gates.penalty()).backward()
        for p, m in masks:
            p.grad.mul_(m)
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
        opt.step()


def test_fine_tune_is_the_loop_written_out_by_hand():
    model, data = toy()
    runs = []
    for loop in ("by hand", "fine_tune"):
        torch.manual_seed(1)
        m = copy.deepcopy(model)
        gates = HardConcreteGates({"enc-self": (2, 4)})
        opt = torch.optim.Adam([*m.parameters(), *gates.parameters()], lr=1e-2)
        masks = [(m.embed.weight, (torch.arange(VOCAB) % 2 == 0).float()[:, None])]   # half the rows frozen
        stream = batch_stream(data, 64, seed=1)
        if loop == "by hand":
            by_hand(m, opt, stream, gates, 0.3, 0.5, masks, 7)
            seen = None
        else:
            def mask():
                for p, k in masks:
                    p.grad.mul_(k)
            loss = lambda b: token_loss(m, *b, 0.1, gates=gates())
            seen = list(fine_tune(m, opt, one_batch_updates(stream), loss, 7, penalty=gates.penalty, weight=0.3,
                                  clip_norm=0.5, after_backward=mask))
        runs.append((m.state_dict(), gates.state_dict(), seen))
    (hand, hand_gates, _), (loop, loop_gates, done) = runs
    assert [d.step for d in done] == list(range(7)) and all(d.penalty is not None for d in done)
    assert not torch.equal(hand["encoder.0.self_attn.q_proj.weight"], model.state_dict()["encoder.0.self_attn.q_proj.weight"])
    assert all(torch.equal(hand[k], loop[k]) for k in hand)
    assert all(torch.equal(hand_gates[k], loop_gates[k]) for k in hand_gates)


def test_micro_batches_give_the_gradient_of_their_whole_update():
    """An update of several micro-batches divides each summed loss by the tokens of all of them:
    the gradient is that of the mean token loss over the whole update (no dropout here)."""
    model, data = toy(dropout=0.0)
    batches = list(zip(range(3), batch_stream(data, 40, seed=2)))
    parts = [b for _, b in batches]
    tokens = sum(int(b[2].ne(0).sum()) for b in parts)
    grads = []
    for split in (True, False):
        m = copy.deepcopy(model)
        opt = torch.optim.SGD(m.parameters(), lr=0.0)
        if split:
            list(fine_tune(m, opt, [Update(parts, tokens)], lambda b: token_loss(m, *b, 0.0), 1))
        else:
            opt.zero_grad()
            total = sum(token_loss(m, *b, 0.0)[0] for b in parts)
            (total / tokens).backward()
        grads.append([p.grad.clone() for p in m.parameters()])
    assert any(g.abs().sum() > 0 for g in grads[0])                         # a real comparison, not of zeros
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)


def test_the_schedule_sets_every_group_before_each_update():
    model, data = toy()
    opt = torch.optim.Adam([{"params": model.encoder.parameters()}, {"params": model.decoder.parameters()}], lr=1.0)
    seen = []
    before = lambda step: seen.append([g["lr"] for g in opt.param_groups])
    list(fine_tune(model, opt, one_batch_updates(batch_stream(data, 64, seed=1)),
                   lambda b: token_loss(model, *b, 0.1), 3, start=5, lr=lambda step: step / 10, before=before))
    assert seen == [[0.5, 0.5], [0.6, 0.6], [0.7, 0.7]]


def test_training_pruning_and_adaptation_all_go_through_fine_tune(monkeypatch, tmp_path):
    """Each caller's updates are made by `fine_tune` (spied on where each caller looks it up)."""
    from headlib.pruning import prune
    from headlib.pruning.prune import PruneConfig
    from headlib.studies import adapt
    from headlib.train import trainer
    calls = []
    for where in (trainer, prune, adapt):
        real = where.fine_tune
        monkeypatch.setattr(where, "fine_tune", lambda *a, _real=real, _w=where.__name__, **k: (
            calls.append(_w), _real(*a, **k))[1])
    cfg = get_config("smoke", ["train.max_steps=2", "train.eval_every=100", "train.head_stats_sentences=0"])
    run = trainer.Trainer(cfg, tmp_path / "run", progress=False)
    run.fit()
    prune.prune(run.model, run.data, PruneConfig(steps=2, max_tokens=256))
    adapt.finetune(run.model, run.data.train, adapt.AdaptConfig(steps=2, max_tokens=256))
    assert calls == ["headlib.train.trainer", "headlib.pruning.prune", "headlib.studies.adapt"]
