"""Physical head removal computes what the masked model computes, with fewer parameters."""
import torch
from conftest import tiny_model_config

from headlib.nn.decode import beam_search, greedy
from headlib.nn.model import Transformer
from headlib.pruning.shrink import shrink


def masked_model():
    torch.manual_seed(0)
    model = Transformer(tiny_model_config(enc_layers=2, dec_layers=2, n_heads=4), 40).eval()
    with torch.no_grad():   # biases away from zero so that a headless layer's bias term is tested
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.uniform_(-0.2, 0.2)
    model.set_head_mask("enc-self", torch.tensor([[1.0, 0, 1, 0], [0, 0, 0, 0]]))   # layer 2: no heads
    model.set_head_mask("dec-self", torch.tensor([[0.0, 0, 0, 1], [1, 1, 1, 1]]))
    model.set_head_mask("dec-enc", torch.tensor([[0.0, 1, 0, 0], [0, 0, 1, 1]]))
    return model


def test_shrunk_model_equals_the_masked_model():
    model = masked_model()
    small = shrink(model).eval()
    assert small.num_parameters() < model.num_parameters()
    assert [layer.self_attn.n_heads for layer in small.encoder] == [2, 0]
    assert small.decoder[0].self_attn.q_proj.weight.shape == (8, 32)      # 1 head of 8 dims
    src = torch.randint(4, 40, (3, 9))
    src[0, 6:] = 0
    tgt = torch.randint(4, 40, (3, 5))
    torch.testing.assert_close(small(src, tgt), model(src, tgt), atol=1e-5, rtol=1e-5)
    assert greedy(small, src, max_len=8) == greedy(model, src, max_len=8)            # KV-cached decoding
    assert beam_search(small, src, beam=3, max_len=8) == beam_search(model, src, beam=3, max_len=8)


def test_gates_still_index_the_original_heads():
    model = masked_model()
    small = shrink(model).eval()
    gates = {"dec-enc": torch.tensor([[0.3, 0.7, 0.1, 0.9], [0.2, 0.4, 0.6, 0.8]])}
    src, tgt = torch.randint(4, 40, (2, 6)), torch.randint(4, 40, (2, 4))
    torch.testing.assert_close(small(src, tgt, gates=gates), model(src, tgt, gates=gates), atol=1e-5, rtol=1e-5)
