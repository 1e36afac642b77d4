"""Multi-head self-attention and Transformer encoders with switchable skip, FFN and LayerNorm.

`SelfAttention` normalizes its logits by softmax or Sinkhorn (`normalizations`). A block is pre-LayerNorm (LN inside each branch, as in ViT and GPT-2): deep stacks of it
train stably without warm-up tricks, and switching the skip connections off at inference
leaves each block as `SA(LN(x))` then `FFN(LN(.))`, so a reader sees exactly which parts
remain. The switches live in `Switches` and are read at every forward pass, so a trained model
can be run without FFN or without skips (as the paper does) without reloading anything.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import torch
from torch import nn

from .masks import check_mask
from .normalizations import NORMALIZATIONS, half_step_count, normalize


# ----------------------------------------------------------------------------- attention


@dataclass
class AttentionInfo:
    """Intermediates of one attention call: `logits` and `attention`, `(batch, heads, n, n)`."""

    logits: torch.Tensor
    attention: torch.Tensor


class SelfAttention(nn.Module):
    """Multi-head self-attention with softmax or Sinkhorn normalization.

    x `(batch, n, d_model)` -> `(batch, n, d_model)`. Logits are `Q K^T / sqrt(d_head)`.
    With `return_info=True` the call also returns an `AttentionInfo`; otherwise nothing is kept.
    A key-padding mask `(batch, n)` is always checked (one host sync): a sample with no real
    token is refused with a ValueError. `check_finite` adds the check of the logits.
    """

    def __init__(self, d_model: int, n_heads: int, normalization: str = "softmax",
                 n_iter: int = 50, bias: bool = False, check_finite: bool = False):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        if normalization not in NORMALIZATIONS:
            raise ValueError(f"unknown normalization {normalization!r}; "
                             f"valid: {', '.join(NORMALIZATIONS)}")
        half_step_count(n_iter)  # a clear error now rather than at the first forward pass
        self.d_model, self.n_heads, self.d_head = d_model, n_heads, d_model // n_heads
        self.normalization, self.n_iter, self.check_finite = normalization, n_iter, check_finite
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None,
                return_info: bool = False):
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"x must have shape (batch, n, d_model={self.d_model}); got "
                             f"{tuple(x.shape)}. One sequence (n, d_model) takes a batch "
                             f"dimension, x.unsqueeze(0); tokens of another width need a "
                             f"model built with that d_model")
        b, n, d = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.n_heads, self.d_head).permute(2, 0, 3, 1, 4)
        logits = q @ k.transpose(-1, -2) / math.sqrt(self.d_head)
        head_mask = None
        if mask is not None:  # always checked: a sample with no token has no attention at all
            check_mask(mask, torch.Size([b]), n, of="x")
            head_mask = mask[:, None, :]
        attn = normalize(logits, self.normalization, self.n_iter, head_mask, self.check_finite)
        y = self.out((attn @ v).transpose(1, 2).reshape(b, n, d))
        if return_info:
            return y, AttentionInfo(logits=logits, attention=attn)
        return y


# ----------------------------------------------------------------------------- blocks


@dataclass
class Switches:
    """Which parts of every block run. Change them on a live model; no reload needed."""

    skip: bool = True
    ffn: bool = True
    layernorm: bool = True


@dataclass
class EncoderConfig:
    d_model: int = 128
    n_heads: int = 4
    depth: int = 24
    d_ff: int = 256  # FFN hidden width
    normalization: str = "softmax"  # or "sinkhorn"
    n_iter: int = 50  # full Sinkhorn iterations
    switches: Switches = field(default_factory=Switches)
    # The attention-logit scale at initialisation: W_q and W_k drawn as in `init_random_`, so
    # that the logits of unit-variance tokens start with this standard deviation. None:
    # PyTorch's default initialisation (logit scale about 0.3).
    logit_init: float | None = None

    def __post_init__(self):
        if self.logit_init is not None and not (math.isfinite(self.logit_init)
                                                and self.logit_init > 0):
            raise ValueError(f"logit_init is a positive logit scale or None; got "
                             f"{self.logit_init!r}")


@dataclass
class EncoderOutput:
    """x: the last hidden state `(batch, n, d)`. When recorded: `hidden` `(layers + 1, batch,
    n, d)` with layer 0 = the input (embeddings), `attn_out` the self-attention sub-layer's
    outputs `(layers, batch, n, d)`, and `attention` and the `logits` it normalized,
    `(layers, batch, heads, n, n)`."""

    x: torch.Tensor
    hidden: torch.Tensor | None = None
    attn_out: torch.Tensor | None = None
    attention: torch.Tensor | None = None
    logits: torch.Tensor | None = None


class Block(nn.Module):
    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.attn = SelfAttention(cfg.d_model, cfg.n_heads, cfg.normalization, cfg.n_iter)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.ffn = nn.Sequential(nn.Linear(cfg.d_model, cfg.d_ff), nn.GELU(),
                                 nn.Linear(cfg.d_ff, cfg.d_model))

    def forward(self, x, mask, sw: Switches, record: bool):
        h = self.ln1(x) if sw.layernorm else x
        a, info = self.attn(h, mask, return_info=True) if record else (self.attn(h, mask), None)
        x = x + a if sw.skip else a
        if sw.ffn:
            f = self.ffn(self.ln2(x) if sw.layernorm else x)
            x = x + f if sw.skip else f
        return x, a, info


class Encoder(nn.Module):
    """A stack of `depth` blocks on token vectors `(batch, n, d_model)`."""

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.cfg = replace(cfg, switches=replace(cfg.switches))  # own copy of the switches
        self.blocks = nn.ModuleList(Block(self.cfg) for _ in range(cfg.depth))
        if cfg.logit_init is not None:
            with torch.no_grad():
                for block in self.blocks:
                    _init_query_key_(block.attn, cfg.logit_init)

    @property
    def switches(self) -> Switches:
        return self.cfg.switches

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None,
                record: bool = False) -> EncoderOutput:
        hidden, attn_out, attention, logits = [x], [], [], []
        for block in self.blocks:
            x, a, info = block(x, mask, self.switches, record)
            if record:
                hidden.append(x)
                attn_out.append(a)
                attention.append(info.attention)
                logits.append(info.logits)
        if not record:
            return EncoderOutput(x)
        return EncoderOutput(x, torch.stack(hidden), torch.stack(attn_out), torch.stack(attention),
                             torch.stack(logits))


def init_random_(encoder: Encoder, logit_std: float, generator: torch.Generator) -> Encoder:
    """Gaussian weights for the random-weight experiments, with `logit_std` the standard
    deviation of the attention logits for unit-variance tokens.

    W_q, W_k entries ~ N(0, logit_std / d) so that q.k / sqrt(d_head) has std ~ logit_std;
    W_v, W_o and the FFN ~ N(0, 1 / fan_in) so that they roughly keep norms; biases zero.
    """
    with torch.no_grad():
        for block in encoder.blocks:
            d = block.attn.qkv.in_features
            _init_query_key_(block.attn, logit_std, generator)
            block.attn.qkv.weight[2 * d:].normal_(0.0, 1 / math.sqrt(d), generator=generator)
            for lin in (block.attn.out, block.ffn[0], block.ffn[2]):
                lin.weight.normal_(0.0, 1 / math.sqrt(lin.in_features), generator=generator)
                if lin.bias is not None:
                    lin.bias.zero_()
    return encoder


def _init_query_key_(attn: nn.Module, logit_std: float,
                     generator: torch.Generator | None = None) -> None:
    """W_q, W_k entries ~ N(0, logit_std / d) (no gradient): q.k / sqrt(d_head) of
    unit-variance tokens then has standard deviation about `logit_std`."""
    d = attn.qkv.in_features
    attn.qkv.weight[: 2 * d].normal_(0.0, math.sqrt(logit_std / d), generator=generator)


def random_stack(d_model: int, n_heads: int, depth: int, normalization: str,
                 logit_std: float, switches: Switches, seed: int, n_iter: int,
                 device: torch.device | str = "cpu") -> Encoder:
    """An `Encoder` with Gaussian weights (see `init_random_`) and the given switches, in
    eval mode: the random-weight networks of chapters 1-4."""
    cfg = EncoderConfig(d_model=d_model, n_heads=n_heads, depth=depth, d_ff=2 * d_model,
                        normalization=normalization, n_iter=n_iter, switches=switches)
    encoder = init_random_(Encoder(cfg), logit_std, torch.Generator().manual_seed(seed))
    return encoder.to(device).eval()


# ----------------------------------------------------------------------------- classifiers


@dataclass
class ModelConfig:
    """A classifier: `kind` "text" (token ids) or "image" (patches), and its encoder."""

    kind: str
    n_classes: int
    encoder: EncoderConfig = field(default_factory=EncoderConfig)
    vocab_size: int = 0  # text
    max_len: int = 128  # text: number of learned positions
    image_size: int = 28  # image: side in pixels
    patch: int = 4  # image: patch side in pixels
    channels: int = 1  # image


class Classifier(nn.Module):
    """Embedding (defined by the subclass) -> Encoder -> LayerNorm of the first token -> head.

    The first token is <cls> (prepended by the tokenizer for text, a learned vector for
    images). The final LayerNorm belongs to the head and stays on when the blocks' LayerNorm
    is switched off."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.encoder = Encoder(cfg.encoder)
        self.norm = nn.LayerNorm(cfg.encoder.d_model)
        self.head = nn.Linear(cfg.encoder.d_model, cfg.n_classes)

    @property
    def switches(self) -> Switches:
        return self.encoder.switches

    def embed(self, inputs: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def forward(self, inputs: torch.Tensor, mask: torch.Tensor | None = None,
                record: bool = False) -> tuple[torch.Tensor, EncoderOutput]:
        """Class logits `(batch, n_classes)` and the encoder's output (see `EncoderOutput`)."""
        out = self.encoder(self.embed(inputs), mask, record)
        return self.head(self.norm(out.x[:, 0])), out


class TransformerEncoder(Classifier):
    """Text classifier: token embedding + learned positions. inputs: ids `(batch, n)`."""

    def __init__(self, cfg: ModelConfig):
        super().__init__(cfg)
        if cfg.vocab_size < 3:
            raise ValueError(f"vocab_size must be set for a text model; got {cfg.vocab_size}")
        self.tokens = nn.Embedding(cfg.vocab_size, cfg.encoder.d_model)
        self.positions = nn.Parameter(torch.randn(cfg.max_len, cfg.encoder.d_model) * 0.02)

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        if not isinstance(ids, torch.Tensor) or ids.dim() != 2 or ids.is_floating_point():
            shape = tuple(ids.shape) if isinstance(ids, torch.Tensor) else type(ids).__name__
            raise ValueError(f"token ids must be an integer tensor (batch, n); got {shape}"
                             + (f" of {ids.dtype}" if isinstance(ids, torch.Tensor) else ""))
        if ids.shape[1] > self.cfg.max_len:
            raise ValueError(f"sequence length {ids.shape[1]} exceeds max_len {self.cfg.max_len}")
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= self.cfg.vocab_size):
            raise ValueError(f"token ids must be in [0, vocab_size={self.cfg.vocab_size}); got "
                             f"ids from {int(ids.min())} to {int(ids.max())}")
        return self.tokens(ids) + self.positions[: ids.shape[1]]


class ViT(Classifier):
    """Vision Transformer: non-overlapping patches, a <cls> vector, learned positions.
    inputs: images `(batch, channels, side, side)`."""

    def __init__(self, cfg: ModelConfig):
        super().__init__(cfg)
        if cfg.image_size % cfg.patch:
            raise ValueError(f"image_size {cfg.image_size} is not a multiple of patch {cfg.patch}")
        d = cfg.encoder.d_model
        self.patches = nn.Conv2d(cfg.channels, d, kernel_size=cfg.patch, stride=cfg.patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, d))
        n_tokens = 1 + (cfg.image_size // cfg.patch) ** 2
        self.positions = nn.Parameter(torch.randn(n_tokens, d) * 0.02)

    def embed(self, images: torch.Tensor) -> torch.Tensor:
        expected = (self.cfg.channels, self.cfg.image_size, self.cfg.image_size)
        if tuple(images.shape[1:]) != expected:
            raise ValueError(f"images must have shape (batch, {expected[0]}, {expected[1]}, "
                             f"{expected[2]}); got {tuple(images.shape)}")
        x = self.patches(images).flatten(2).transpose(1, 2)  # (batch, patches, d)
        return torch.cat([self.cls.expand(len(x), -1, -1), x], dim=1) + self.positions


def build_model(cfg: ModelConfig) -> Classifier:
    """`TransformerEncoder` for kind "text", `ViT` for kind "image"."""
    models = {"text": TransformerEncoder, "image": ViT}
    if cfg.kind not in models:
        raise ValueError(f"unknown model kind {cfg.kind!r}; valid: {', '.join(models)}")
    return models[cfg.kind](cfg)
