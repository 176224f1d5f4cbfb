"""Hard Concrete gates against closed forms and quadrature (Louizos et al. 2018)."""
import math

import pytest
import torch

from headlib.config import ModelConfig
from headlib.nn.model import Transformer
from headlib.pruning.gates import HardConcreteGates

LOG_ALPHAS = torch.tensor([-3.0, -1.0, 0.0, 0.5, 2.0])


def quadrature_mean(log_alpha, beta=0.33, gamma=-0.1, zeta=1.1, n=200_001):
    """E[g] by the midpoint rule over u in (0, 1) — independent of the sampler."""
    u = (torch.arange(n, dtype=torch.float64) + 0.5) / n
    s = torch.sigmoid((torch.log(u) - torch.log1p(-u) + log_alpha) / beta)
    return (s * (zeta - gamma) + gamma).clamp(0, 1).mean().item()


def test_empirical_gate_distribution_matches_closed_form():
    torch.manual_seed(0)
    gates = HardConcreteGates({"enc-self": (1, len(LOG_ALPHAS))})
    with torch.no_grad():
        gates.log_alpha["enc_self"].copy_(LOG_ALPHAS[None])
    gates.train()
    assert gates()["enc-self"].shape == (1, len(LOG_ALPHAS))            # one draw per head
    with torch.no_grad():                                                # 100k draws at once
        draws = gates.sample(gates.log_alpha["enc_self"].expand(100_000, -1))   # (N, 5)
    a = LOG_ALPHAS
    p0, p1 = gates.prob_zero(a), gates.prob_one(a)
    for j in range(len(a)):
        assert (draws[:, j] == 0).float().mean().item() == pytest.approx(p0[j].item(), abs=0.01)
        assert (draws[:, j] == 1).float().mean().item() == pytest.approx(p1[j].item(), abs=0.01)
        assert draws[:, j].mean().item() == pytest.approx(quadrature_mean(a[j].item()), abs=0.01)
    assert torch.allclose(gates.prob_nonzero(a), 1 - p0, atol=1e-6)


def test_deterministic_gate_formula():
    gates = HardConcreteGates({"dec-enc": (1, len(LOG_ALPHAS))})
    with torch.no_grad():
        gates.log_alpha["dec_enc"].copy_(LOG_ALPHAS[None])
    gates.eval()
    expected = [min(1.0, max(0.0, 1 / (1 + math.exp(-a)) * 1.2 - 0.1)) for a in LOG_ALPHAS.tolist()]
    assert torch.allclose(gates()["dec-enc"][0], torch.tensor(expected), atol=1e-6)


def test_penalty_gradient_lowers_log_alpha():
    gates = HardConcreteGates({"enc-self": (2, 3), "dec-self": (2, 3)})
    before = {k: v.detach().clone() for k, v in gates.log_alpha.items()}
    opt = torch.optim.SGD(gates.parameters(), lr=0.5)
    gates.penalty().backward()
    assert all((p.grad > 0).all() for p in gates.parameters())
    opt.step()
    assert all((gates.log_alpha[k] < before[k]).all() for k in before)


def test_closed_gate_is_the_head_removed():
    torch.manual_seed(0)
    cfg = ModelConfig(d_model=16, n_heads=4, d_ff=32, enc_layers=2, dec_layers=2, dropout=0.0)
    model = Transformer(cfg, 30).eval()
    gates = HardConcreteGates({"enc-self": (2, 4)}).eval()
    with torch.no_grad():
        gates.log_alpha["enc_self"].fill_(10.0)
        gates.log_alpha["enc_self"][1, 2] = -10.0
    g = gates()
    assert g["enc-self"][1, 2] == 0 and (g["enc-self"].sum() == 7)
    src = torch.tensor([[5, 6, 7, 2]]); tgt = torch.tensor([[1, 8, 9]])
    mask = torch.ones(2, 4); mask[1, 2] = 0
    model_masked = Transformer(cfg, 30).eval()
    model_masked.load_state_dict(model.state_dict())
    model_masked.set_head_mask("enc-self", mask)
    assert torch.equal(model(src, tgt, gates=g), model_masked(src, tgt))
    assert gates.hard_masks()["enc-self"].tolist() == mask.tolist()


def test_penalty_is_the_expected_number_of_open_gates():
    """Closed form (paper Sec. 6.1) at log_alpha = 0, and the frequency of nonzero sampled gates."""
    gates = HardConcreteGates({"enc-self": (2, 3), "dec-self": (2, 3)})
    with torch.no_grad():
        for a in gates.log_alpha.values():
            a.zero_()
    p_open = 1 / (1 + math.exp(0.33 * math.log(0.1 / 1.1)))
    assert gates.penalty().item() == pytest.approx(12 * p_open, rel=1e-6)
    torch.manual_seed(0)
    many = HardConcreteGates({"enc-self": (1, 40000)})
    with torch.no_grad():
        many.log_alpha["enc_self"].fill_(0.7)
    many.train()
    sampled = (many()["enc-self"] != 0).float().mean().item()
    assert sampled == pytest.approx(many.penalty().item() / 40000, abs=0.01)


@pytest.mark.parametrize("stretch", [(-0.1, 1.1), (-0.2, 1.05)])
def test_hard_mask_opens_a_head_where_one_is_likelier_than_zero_by_sampling(stretch):
    """Near the threshold, where wrong rules (e.g. P(g != 0) > 1/2) disagree: the hard mask against
    the sampled frequencies of g = 1 and g = 0. With the default symmetric stretch the threshold is
    log_alpha = 0; with (-0.2, 1.05) it is not."""
    gamma, zeta = stretch
    a = torch.linspace(-1.0, 1.0, 21)
    gates = HardConcreteGates({"enc-self": (1, len(a))}, gamma=gamma, zeta=zeta)
    with torch.no_grad():
        gates.log_alpha["enc_self"].copy_(a[None])
    torch.manual_seed(0)
    with torch.no_grad():
        draws = gates.sample(gates.log_alpha["enc_self"].expand(400_000, -1))       # (N, 21)
    p1, p0 = (draws == 1).float().mean(0), (draws == 0).float().mean(0)
    clear = (p1 - p0).abs() > 0.005                 # sampling error of p1 - p0 is about 0.001
    sampled = (p1 > p0).float()
    assert clear.sum() >= 19
    assert gates.hard_masks()["enc-self"][0][clear].tolist() == sampled[clear].tolist()
    if stretch == (-0.1, 1.1):
        assert sampled[clear].tolist() == (a[clear] > 0).float().tolist()
    else:
        assert sampled[clear].tolist() != (a[clear] > 0).float().tolist()
