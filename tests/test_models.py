import math

import pytest
import torch

from rankcollapse.models import (Encoder, EncoderConfig, SelfAttention, Switches, init_random_,
                                 random_stack)
from rankcollapse.normalizations import marginal_errors


def small(normalization="softmax", **switches):
    cfg = EncoderConfig(d_model=16, n_heads=2, depth=3, d_ff=32, normalization=normalization,
                        n_iter=20, switches=Switches(**switches))
    torch.manual_seed(0)
    return Encoder(cfg).eval()


def test_recorded_shapes_and_layer_zero_is_the_input():
    enc = small()
    x = torch.randn(4, 7, 16)
    out = enc(x, record=True)
    assert out.hidden.shape == (4, 4, 7, 16)
    assert out.attn_out.shape == (3, 4, 7, 16)
    assert out.attention.shape == (3, 4, 2, 7, 7)
    assert torch.equal(out.hidden[0], x)
    torch.testing.assert_close(out.hidden[-1], out.x)
    bare = enc(x)
    assert bare.hidden is None and bare.attention is None and bare.attn_out is None
    torch.testing.assert_close(bare.x, out.x)


def test_switches_act_at_inference_without_reloading():
    enc = small()
    x = torch.randn(2, 5, 16)
    full = enc(x).x
    enc.switches.skip = False
    no_skip = enc(x).x
    assert not torch.allclose(full, no_skip)
    enc.switches.ffn = False
    enc.switches.layernorm = False
    pure = enc(x).x
    expected = x
    for block in enc.blocks:  # pure attention: the blocks' attention applied in turn
        expected = block.attn(expected)
    torch.testing.assert_close(pure, expected)
    enc.switches.skip = enc.switches.ffn = enc.switches.layernorm = True
    torch.testing.assert_close(enc(x).x, full)


def test_each_encoder_owns_its_switches():
    cfg = EncoderConfig(d_model=8, n_heads=2, depth=1)
    a, b = Encoder(cfg), Encoder(cfg)
    a.switches.skip = False
    assert b.switches.skip and cfg.switches.skip


def test_mask_flows_into_attention():
    enc = small("sinkhorn")
    mask = torch.tensor([[True, True, True, False, False]])
    out = enc(torch.randn(1, 5, 16), mask=mask, record=True)
    assert (out.attention[..., 3:, :] == 0).all() and (out.attention[..., :, 3:] == 0).all()


def test_sinkhorn_encoder_attention_is_doubly_stochastic():
    out = small("sinkhorn")(torch.randn(3, 6, 16), record=True)
    rows, cols = marginal_errors(out.attention)
    assert rows.max() < 1e-4 and cols.max() < 1e-5


@pytest.mark.parametrize("logit_std", [0.5, 2.0])
def test_init_random_sets_the_logit_scale(logit_std):
    enc = init_random_(Encoder(EncoderConfig(d_model=64, n_heads=2, depth=2)), logit_std,
                       torch.Generator().manual_seed(0))
    enc.switches.layernorm = False
    out = enc(torch.randn(16, 32, 64), record=True)
    block = enc.blocks[0]
    _, info = block.attn(torch.randn(16, 32, 64), return_info=True)
    assert info.logits.std().item() == pytest.approx(logit_std, rel=0.2)
    assert out.hidden.shape[0] == 3


def test_random_stack_is_reproducible():
    x = torch.randn(2, 5, 8)
    a = random_stack(8, 2, 2, "softmax", 1.0, Switches(), seed=3, n_iter=50)
    b = random_stack(8, 2, 2, "softmax", 1.0, Switches(), seed=3, n_iter=50)
    torch.testing.assert_close(a(x).x, b(x).x)


# ----------------------------------------------------------------------------- attention


@pytest.mark.parametrize("normalization", ["softmax", "sinkhorn"])
def test_self_attention_shapes_and_info(normalization):
    torch.manual_seed(0)
    layer = SelfAttention(16, 4, normalization, n_iter=10)
    x = torch.randn(3, 7, 16)
    y, info = layer(x, return_info=True)
    assert y.shape == x.shape
    assert info.attention.shape == info.logits.shape == (3, 4, 7, 7)
    torch.testing.assert_close(info.attention.sum(-1), torch.ones(3, 4, 7))
    torch.testing.assert_close(layer(x), y)
    assert not any(isinstance(v, torch.Tensor) for v in vars(layer).values())


def test_self_attention_logits_are_scaled_dot_products():
    torch.manual_seed(1)
    layer = SelfAttention(8, 2)
    x = torch.randn(1, 5, 8)
    _, info = layer(x, return_info=True)
    q, k, _ = layer.qkv(x).split(8, dim=-1)
    q0, k0 = q[0, :, :4], k[0, :, :4]
    torch.testing.assert_close(info.logits[0, 0], q0 @ k0.T / math.sqrt(4))


def test_self_attention_mask_reaches_the_normalization():
    torch.manual_seed(2)
    layer = SelfAttention(8, 2, "sinkhorn", n_iter=10)
    mask = torch.tensor([[True, True, True, False]])
    _, info = layer(torch.randn(1, 4, 8), mask=mask, return_info=True)
    assert (info.attention[..., 3, :] == 0).all() and (info.attention[..., :, 3] == 0).all()


def test_self_attention_rejects_bad_configuration():
    with pytest.raises(ValueError, match="divisible"):
        SelfAttention(10, 3)
    with pytest.raises(ValueError, match="unknown normalization"):
        SelfAttention(8, 2, "relu")
    with pytest.raises(TypeError, match="n_iter must be a positive integer"):
        SelfAttention(8, 2, "sinkhorn", n_iter=2.5)


def test_classifiers_refuse_bad_inputs_with_clear_errors():
    from rankcollapse.models import ModelConfig, build_model

    encoder = EncoderConfig(d_model=8, n_heads=2, depth=1, d_ff=16)
    text = build_model(ModelConfig("text", 2, encoder, vocab_size=10, max_len=6))
    with pytest.raises(ValueError, match=r"in \[0, vocab_size=10\); got ids from 0 to 12"):
        text(torch.tensor([[0, 3, 12]]))
    with pytest.raises(ValueError, match=r"integer tensor \(batch, n\); got \(3,\)"):
        text(torch.tensor([1, 2, 3]))
    with pytest.raises(ValueError, match="exceeds max_len 6"):
        text(torch.ones(1, 7, dtype=torch.long))
    image = build_model(ModelConfig("image", 2, encoder, image_size=8, patch=4))
    with pytest.raises(ValueError, match=r"images must have shape \(batch, 1, 8, 8\)"):
        image(torch.rand(8, 8))


@pytest.mark.parametrize("scale", [0.5, 3.0])
def test_logit_init_sets_the_starting_logit_scale(scale):
    torch.manual_seed(0)
    encoder = Encoder(EncoderConfig(d_model=64, n_heads=4, depth=3, d_ff=64,
                                    logit_init=scale))
    x = torch.randn(16, 24, 64)  # unit-variance tokens, as after a LayerNorm
    with torch.no_grad():
        logits = encoder(x, record=True).logits
    # the first layer sees x itself; the others see whatever the blocks made of it
    assert abs(float(logits[0].std()) / scale - 1) < 0.15
    torch.manual_seed(0)
    default = Encoder(EncoderConfig(d_model=64, n_heads=4, depth=3, d_ff=64))
    with torch.no_grad():
        assert float(default(x, record=True).logits[0].std()) < 0.5  # PyTorch's own init


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf")])
def test_logit_init_must_be_a_positive_scale(bad):
    with pytest.raises(ValueError, match="logit_init"):
        EncoderConfig(logit_init=bad)


@pytest.mark.parametrize("normalization", ["softmax", "sinkhorn"])
def test_self_attention_refuses_a_sample_with_no_token_by_default(normalization):
    """The default check_finite=False skips the logits check, never the mask check."""
    layer = SelfAttention(8, 2, normalization, n_iter=10)
    mask = torch.tensor([[True, True, False, False], [False] * 4])
    with pytest.raises(ValueError, match="no real token"):
        layer(torch.randn(2, 4, 8), mask=mask)


@pytest.mark.parametrize("shape,got", [((5, 8), r"\(5, 8\)"), ((2, 5, 6), r"\(2, 5, 6\)")])
def test_self_attention_names_a_wrong_input_shape_and_the_way_out(shape, got):
    """A 2-D input used to fail with "not enough values to unpack", a wrong width inside the
    projection's matrix product."""
    layer = SelfAttention(8, 2)
    with pytest.raises(ValueError, match=rf"x must have shape \(batch, n, d_model=8\); got {got}"
                                         r".*unsqueeze\(0\)"):
        layer(torch.randn(*shape))
    with pytest.raises(ValueError, match=rf"x must have shape \(batch, n, d_model=16\); got "
                                         rf"\(7, 16\)"):
        small()(torch.randn(7, 16))
