"""Hooks by name (`headlib.nn.hooks`): installed for one block and removed after it, unknown names
refused, identity hooks change nothing, and every hook point has the shape its comment says."""
import re
from pathlib import Path

import pytest
import torch
from conftest import tiny_model_config

from headlib.nn.hooks import hook_names, hooks
from headlib.nn.model import KINDS, HookPoint, Transformer

B, S, T, H, D = 2, 5, 4, 4, 32


def tiny():
    torch.manual_seed(0)
    return Transformer(tiny_model_config(), vocab_size=20).eval()


def batch():
    src = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 11, 2, 0]])        # (B, S)
    tgt_in = torch.tensor([[1, 12, 13, 14], [1, 15, 16, 0]])        # (B, T)
    return src, tgt_in


def n_hooks(model) -> int:
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())


def test_hooks_are_installed_for_the_block_and_removed_after_it():
    model, (src, tgt_in) = tiny(), batch()
    seen = []
    name = "decoder.1.cross_attn.hook_weights"
    with hooks(model, {name: lambda m, i, o: seen.append(o.shape)}):
        assert n_hooks(model) == 1
        model(src, tgt_in)
    assert seen == [(B, H, T, S)]
    assert n_hooks(model) == 0
    model(src, tgt_in)
    assert len(seen) == 1                                               # not called any more


def test_hooks_are_removed_when_the_block_raises():
    model = tiny()
    with pytest.raises(RuntimeError, match="inside"):
        with hooks(model, {"enc_norm": lambda m, i, o: None, "encoder.0.hook_input": lambda m, i, o: None}):
            assert n_hooks(model) == 2
            raise RuntimeError("inside")
    assert n_hooks(model) == 0


def test_an_unknown_name_is_one_error_naming_it_and_installs_nothing():
    model = tiny()
    with pytest.raises(ValueError, match=r"'encoder\.0\.self_attn\.hook_weight'.*'encoder\.0\.self_attn\.hook_weights'"):
        with hooks(model, {"enc_norm": lambda m, i, o: None, "encoder.0.self_attn.hook_weight": lambda m, i, o: None}):
            pass
    assert n_hooks(model) == 0
    with pytest.raises(ValueError, match="unknown attention kind"):
        hook_names(model, "hook_weights", kind="encoder")


def test_hook_names_in_layer_order():
    model = tiny()
    assert hook_names(model, "hook_weights", kind="enc-self") == \
        ["encoder.0.self_attn.hook_weights", "encoder.1.self_attn.hook_weights"]
    assert hook_names(model, "hook_heads", kind="dec-enc") == \
        ["decoder.0.cross_attn.hook_heads", "decoder.1.cross_attn.hook_heads"]
    assert hook_names(model, "hook_input") == \
        ["encoder.0.hook_input", "encoder.1.hook_input", "decoder.0.hook_input", "decoder.1.hook_input"]
    assert hook_names(model, "hook_weights") == \
        ["encoder.0.self_attn.hook_weights", "encoder.1.self_attn.hook_weights",
         "decoder.0.self_attn.hook_weights", "decoder.0.cross_attn.hook_weights",
         "decoder.1.self_attn.hook_weights", "decoder.1.cross_attn.hook_weights"]


def every_hook_point(model) -> list[str]:
    return [name for name, m in model.named_modules() if isinstance(m, HookPoint)]


def test_hook_points_add_nothing_to_the_state_dict():
    model = tiny()
    assert len(every_hook_point(model)) == 4 + 2 * 2 + 2 * 2 * 2        # inputs, enc-self, dec-self + dec-enc
    assert not any("hook_" in key for key in model.state_dict())
    assert all(not list(model.get_submodule(n).parameters()) and not list(model.get_submodule(n).buffers())
               for n in every_hook_point(model))


@pytest.mark.parametrize("returns", ["None", "output"])
def test_identity_hooks_leave_the_forward_unchanged(returns):
    model, (src, tgt_in) = tiny(), batch()
    before, attn = model(src, tgt_in, return_attention=True)
    fn = (lambda m, i, o: None) if returns == "None" else (lambda m, i, o: o)
    with hooks(model, dict.fromkeys(every_hook_point(model), fn)):
        after, attn_after = model(src, tgt_in, return_attention=True)
    assert torch.equal(before, after)
    assert all(torch.equal(attn[k], attn_after[k]) for k in KINDS)


def test_hook_points_have_the_shapes_of_their_comments():
    model, (src, tgt_in) = tiny(), batch()
    shapes = {}

    def record(module, inputs, output):
        shapes[module] = output.shape
    with hooks(model, dict.fromkeys(every_hook_point(model), record)):
        model(src, tgt_in)
    by_name = {name: shapes[model.get_submodule(name)] for name in every_hook_point(model)}
    dh = D // H
    for l in range(2):
        assert by_name[f"encoder.{l}.hook_input"] == (B, S, D)                      # (B, S, D)
        assert by_name[f"decoder.{l}.hook_input"] == (B, T, D)                      # (B, T, D)
        assert by_name[f"encoder.{l}.self_attn.hook_weights"] == (B, H, S, S)       # (B, H, Tq, Tk)
        assert by_name[f"decoder.{l}.self_attn.hook_weights"] == (B, H, T, T)
        assert by_name[f"decoder.{l}.cross_attn.hook_weights"] == (B, H, T, S)
        assert by_name[f"encoder.{l}.self_attn.hook_heads"] == (B, H, S, dh)        # (B, H, Tq, dh)
        assert by_name[f"decoder.{l}.self_attn.hook_heads"] == (B, H, T, dh)
        assert by_name[f"decoder.{l}.cross_attn.hook_heads"] == (B, H, T, dh)


def test_decoder_input_is_one_position_per_cached_decoding_step():
    from headlib.nn.decode import greedy
    model, (src, _) = tiny(), batch()
    shapes = []
    with hooks(model, {"decoder.1.hook_input": lambda m, i, o: shapes.append(tuple(o.shape))}):
        greedy(model, src, max_len=3)
    assert shapes and set(shapes) == {(B, 1, D)}


def test_a_replacing_hook_changes_the_forward():
    """The control: what a hook returns is used (zeroed encoder heads change the logits)."""
    model, (src, tgt_in) = tiny(), batch()
    before = model(src, tgt_in)
    with hooks(model, dict.fromkeys(hook_names(model, "hook_heads", "enc-self"), lambda m, i, o: torch.zeros_like(o))):
        zeroed = model(src, tgt_in)
    assert not torch.allclose(before, zeroed)


def test_nn_imports_no_analysis_or_pruning():
    """The network knows its hook points, not the analyses that use them."""
    nn_dir = Path(__file__).resolve().parents[1] / "headlib" / "nn"
    for path in nn_dir.glob("*.py"):
        imports = re.findall(r"^\s*(?:from|import) (headlib\.\w+)", path.read_text(), re.MULTILINE)
        assert not {"headlib.analysis", "headlib.pruning"} & set(imports), (path.name, imports)
