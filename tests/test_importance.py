"""Gradient head importance (Michel et al. 2019) against finite differences; the iterative
test-time pruning schedule."""
import torch
from conftest import tiny_model_config

from headlib.analysis.importance import gradient_importance, michel_schedule, prune_by_scores
from headlib.data.batching import Encoded, collate
from headlib.nn.model import Transformer
from headlib.nn.loss import token_loss


def setup():
    torch.manual_seed(0)
    model = Transformer(tiny_model_config(n_heads=4), 30).eval()
    g = torch.Generator().manual_seed(1)
    pairs = Encoded([torch.randint(4, 30, (n,), generator=g).tolist() for n in (5, 7, 6)],
                    [torch.randint(4, 30, (n,), generator=g).tolist() for n in (6, 4, 5)])
    return model, pairs


def test_importance_is_the_absolute_loss_derivative_by_finite_differences():
    model, pairs = setup()
    scores = gradient_importance(model, pairs, ("enc-self", "dec-enc"), normalize=False)
    src, tgt_in, tgt_out = collate(pairs, list(range(len(pairs))))

    def loss(kind, i, j, delta):
        xi = {k: torch.ones(2, 4) for k in ("enc-self", "dec-enc")}
        xi[kind][i, j] += delta
        with torch.no_grad():
            total, n = token_loss(model, src, tgt_in, tgt_out, 0.1, gates=xi)
        return float(total / n)

    for kind, i, j in (("enc-self", 0, 1), ("enc-self", 1, 3), ("dec-enc", 1, 0)):
        fd = abs(loss(kind, i, j, 1e-2) - loss(kind, i, j, -1e-2)) / 2e-2
        assert abs(float(scores[kind][i, j]) - fd) <= 2e-3 + 2e-2 * fd, (kind, i, j, scores[kind][i, j], fd)
    normalized = gradient_importance(model, pairs, ("enc-self",))["enc-self"]
    torch.testing.assert_close(normalized.norm(dim=1), torch.ones(2))


def test_masked_heads_have_zero_importance_and_the_schedule_prunes_the_least_important_first():
    model, pairs = setup()
    model.set_head_mask("enc-self", torch.tensor([[1.0, 1, 0, 1], [1, 1, 1, 1]]))
    before = model.head_mask("enc-self").clone()
    scores = gradient_importance(model, pairs)["enc-self"]
    assert scores[0, 2] == 0 and (scores[before.bool()] > 0).all()
    schedule = michel_schedule(model, pairs, step=0.25)                # 2 of 8 heads a step
    assert [int(m["enc-self"].sum()) for m in schedule] == [7, 5, 3, 1, 0]
    lowest_open = scores.masked_fill(~before.bool(), float("inf")).flatten().argsort()[:2]   # by hand
    expected = before.flatten().clone()
    expected[lowest_open] = 0
    assert torch.equal(schedule[1]["enc-self"], expected.view_as(before))
    removed = (schedule[0]["enc-self"] - schedule[1]["enc-self"]).bool()
    assert scores[removed].max() <= scores[schedule[1]["enc-self"].bool()].min()
    assert all((later["enc-self"] <= earlier["enc-self"]).all() for earlier, later in zip(schedule, schedule[1:]))
    assert torch.equal(model.head_mask("enc-self"), before)             # the model's masks are restored


def test_the_schedule_rescores_the_pruned_model_after_each_step():
    """Step 2 prunes by the importance of the heads left after step 1 (measured with step 1's mask
    installed), which here closes other heads than the importance measured on the full model."""
    model, pairs = setup()
    kinds = ("enc-self", "dec-enc")
    initial = gradient_importance(model, pairs, kinds)
    schedule = michel_schedule(model, pairs, kinds, step=0.25)          # 4 of the 16 heads a step
    assert [sum(int(m[k].sum()) for k in kinds) for m in schedule] == [16, 12, 8, 4, 0]
    with torch.no_grad():
        for k in kinds:
            model.set_head_mask(k, schedule[1][k])
    rescored = gradient_importance(model, pairs, kinds)
    expected = prune_by_scores(schedule[1], rescored, 4)
    assert all(torch.equal(schedule[2][k], expected[k]) for k in kinds)
    closed = [float(rescored[k][i, j]) for k in kinds for i, j in (schedule[1][k] - schedule[2][k]).nonzero().tolist()]
    kept = [float(rescored[k][i, j]) for k in kinds for i, j in schedule[2][k].nonzero().tolist()]
    assert len(closed) == 4 and max(closed) <= min(kept)
    stale = prune_by_scores(schedule[1], initial, 4)                      # without re-scoring
    assert any(not torch.equal(schedule[2][k], stale[k]) for k in kinds)


def test_keep_top_and_random_masks():
    from headlib.analysis.importance import keep_top, random_mask
    scores = torch.tensor([[0.1, 0.9, 0.5], [0.9, 0.2, 0.0]])
    assert keep_top(scores, 3).tolist() == [[0, 1, 1], [1, 0, 0]]        # tie 0.9/0.9: both kept
    assert keep_top(scores, 1).tolist() == [[0, 1, 0], [0, 0, 0]]        # tie: the earlier head
    assert keep_top(scores, 0).sum() == 0 and keep_top(scores, 6).sum() == 6
    a, b = random_mask((6, 8), 10, seed=1), random_mask((6, 8), 10, seed=2)
    assert a.sum() == b.sum() == 10 and not torch.equal(a, b)
    assert torch.equal(a, random_mask((6, 8), 10, seed=1))


def test_bleu_without_retraining_scores_each_mask_and_restores_the_model(smoke_run):
    from headlib.analysis.importance import bleu_without_retraining
    from headlib.data.corpora import load_split
    from headlib.nn.decode import evaluate_bleu
    from headlib.train import load_model
    _, out = smoke_run
    model, bpe, _ = load_model(out / "final.pt")
    corpus = load_split("en-de", "dev").head(20)
    before = model.head_mask("enc-self").clone()
    closed = torch.zeros_like(before)
    rows = bleu_without_retraining(model, bpe, corpus, [("all", torch.ones_like(before)), ("none", closed)])
    assert [(r["method"], r["heads"]) for r in rows] == [("all", 8), ("none", 0)]
    assert torch.equal(model.head_mask("enc-self"), before)
    assert rows[0]["BLEU"] == evaluate_bleu(model, bpe, corpus)["bleu"]
    model.set_head_mask("enc-self", closed)
    assert rows[1]["BLEU"] == evaluate_bleu(model, bpe, corpus)["bleu"]
    model.set_head_mask("enc-self", before)
