"""The random-matrix control of the paper, and the variants that test its hypothesis.

The paper multiplies random softmax- or Sinkhorn-normalized matrices along paths through the
layers and finds no Sinkhorn advantage. Its hypothesis: in a real network the attention
matrices along a path are correlated, because each layer's input is the previous layer's
output. Here: independent logits (the control), correlated logits
`A_{l+1} = rho A_l + sqrt(1 - rho^2) G_l`, and attention computed by a random-weight network.

Independent units. One *pool* is one draw of everything random: the logits of every layer,
head and input (or one random network and its inputs). Paths sampled from one pool share its
matrices, so they are not independent of each other; each pool is summarised by the median
over its paths, and comparisons resample pools (`stats.compare_table` with unit "pool").
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
import pandas as pd
import torch

from ..measures import path_products, relative_residual, rounding_floor, sample_paths
from ..models import Switches, random_stack
from ..normalizations import NORMALIZATIONS, normalize
from ..stats import (WORDS, VERDICTS, Claim, claim_verdict, compare_groups, compare_table, describe,
                     merge_verdicts, ranges, unit_values)
from .rank_collapse import random_tokens, sweep

# A pool maker: generator -> {normalization: attention (layers, batch, heads, n, n)}.
PoolMaker = Callable[[torch.Generator], dict[str, torch.Tensor]]


def random_logits(n_layers: int, batch: int, n_heads: int, n: int, scale: float,
                  rho: float, generator: torch.Generator) -> torch.Tensor:
    """Gaussian logits `(layers, batch, heads, n, n)` with entries N(0, scale^2) at every
    layer and correlation `rho` between consecutive layers (rho = 0: independent)."""
    if not 0.0 <= rho < 1.0:
        raise ValueError(f"rho must be in [0, 1); got {rho}")
    g = torch.randn(n_layers, batch, n_heads, n, n, generator=generator, dtype=torch.float64)
    layers = [g[0]]
    for noise in g[1:]:
        layers.append(rho * layers[-1] + math.sqrt(1 - rho**2) * noise)
    return torch.stack(layers) * scale


def with_identity_layers(attn: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Replace a random half of the layers' attention matrices by the identity, as the paper
    does to mimic skip connections. attn `(layers, batch, heads, n, n)`."""
    n_layers, n = attn.shape[0], attn.shape[-1]
    chosen = torch.randperm(n_layers, generator=generator)[: n_layers // 2]
    out = attn.clone()
    out[chosen] = torch.eye(n, dtype=attn.dtype, device=attn.device)
    return out


def path_residuals(attn: torch.Tensor, depths, n_paths: int, generator: torch.Generator,
                   norm: str = "composite", order: str = "layer") -> pd.DataFrame:
    """Relative residual of path products (in `order`, see `measures.path_products`) against
    their best rank-1 approximation, for `n_paths` random paths at each depth; column
    `sample` is the input each path was taken from. attn `(layers, batch, heads, n, n)`."""
    n_layers, batch, n_heads = attn.shape[:3]
    frames = []
    for depth in depths:
        paths = sample_paths(n_layers, n_heads, depth, n_paths, batch, generator)
        res = relative_residual(path_products(attn, paths, order).double(), norm, kind="rank1")
        frames.append(pd.DataFrame({"depth": depth, "path": np.arange(n_paths),
                                    "sample": paths.samples.numpy(),
                                    "residual": res.cpu().numpy()}))
    return pd.concat(frames, ignore_index=True)


def paired_paths(attn: dict[str, torch.Tensor], depths, n_paths: int, seed: int,
                 order: str = "layer") -> pd.DataFrame:
    """`path_residuals` of every normalization's attention on the same sampled paths (one
    generator seed), so that the comparison is paired; column normalization."""
    return pd.concat([path_residuals(a, depths, n_paths, torch.Generator().manual_seed(seed),
                                     order=order).assign(normalization=name)
                      for name, a in attn.items()], ignore_index=True)


def pooled_paths(settings: dict[str, PoolMaker], n_pools: int, depths, n_paths: int,
                 seed: int, order: str = "layer") -> pd.DataFrame:
    """`paired_paths` for `n_pools` independent pools of every setting (column pool); pool p
    of every setting is drawn from the same generator seed."""
    frames = []
    for setting, make in settings.items():
        for pool in range(n_pools):
            attn = make(torch.Generator().manual_seed(seed + 7919 * (pool + 1)))
            frames.append(paired_paths(attn, depths, n_paths, seed + pool, order)
                          .assign(setting=setting, pool=pool))
    return pd.concat(frames, ignore_index=True)


def random_pool(n_layers: int, batch: int, n_heads: int, n: int, scale: float,
                rho: float = 0.0, identity: bool = False, n_iter: int = 50) -> PoolMaker:
    """Pools of random logits normalized both ways (the same logits for both); with
    `identity`, the same random half of the layers is replaced by the identity after
    normalization (the identity is not the normalization of any finite logits)."""
    def make(generator: torch.Generator) -> dict[str, torch.Tensor]:
        logits = random_logits(n_layers, batch, n_heads, n, scale, rho, generator)
        layers_seed = int(torch.randint(2**31, (1,), generator=generator))
        attn = {name: normalize(logits, name, n_iter) for name in NORMALIZATIONS}
        if identity:
            attn = {k: with_identity_layers(a, torch.Generator().manual_seed(layers_seed))
                    for k, a in attn.items()}
        return attn
    return make


def network_pool(d_model: int, n_heads: int, n_layers: int, batch: int, n: int, skip: bool,
                 logit_std: float, n_iter: int = 50, device: torch.device | str = "cpu"
                 ) -> PoolMaker:
    """Pools of attention recorded in a random-weight network (no FFN; with skips also
    pre-LayerNorm, as in a real block) on random inputs: one network and its inputs per pool,
    the same weights and inputs for both normalizations."""
    switches = Switches(skip=skip, ffn=False, layernorm=skip)

    @torch.no_grad()
    def make(generator: torch.Generator) -> dict[str, torch.Tensor]:
        x = random_tokens(batch, n, d_model, generator, device)
        weights_seed = int(torch.randint(2**31, (1,), generator=generator))
        return {name: random_stack(d_model, n_heads, n_layers, name, logit_std, switches,
                                   weights_seed, n_iter, device)(x, record=True)
                .attention.double().cpu() for name in NORMALIZATIONS}
    return make


def advantage(table: pd.DataFrame, floor: float = rounding_floor(torch.float64)
              ) -> pd.DataFrame:
    """Per setting and depth, the comparison Sinkhorn / softmax over independent pools
    (`stats.compare_table`: each pool's median over its paths, bootstrap over pools). Pools
    whose median residual is at the rounding `floor` of the attention's dtype (the product is
    rank one to machine precision) are left out."""
    return compare_table(table, unit="pool", by=["setting", "depth"], floor=floor)


def beyond_control(networks: pd.DataFrame, controls: pd.DataFrame, pairs: dict[str, str],
                   floor: float = rounding_floor(torch.float32), min_depth: int = 2
                   ) -> pd.DataFrame:
    """Per network setting and depth >= `min_depth`: is the Sinkhorn / softmax ratio of the
    networks' path products larger than that of independent random matrices at the same
    logit scale (`pairs`: network setting -> control setting)? Networks and control pools are
    independent groups (`stats.compare_groups` of the pools' ratios: 'more' = the networks'
    ratio is the larger); pools with a median at the rounding `floor` are left out."""
    values = pd.concat([networks, controls], ignore_index=True)
    wide = unit_values(values, "pool", ["setting", "depth"])
    wide = wide[(wide["softmax"] > floor) & (wide["sinkhorn"] > floor)]
    ratios = wide.assign(ratio=wide["sinkhorn"] / wide["softmax"])
    rows = []
    for network, control in pairs.items():
        for depth in sorted(set(networks["depth"])):
            if depth < min_depth:
                continue
            at = ratios[ratios["depth"] == depth]
            c = compare_groups(at.loc[at["setting"] == control, "ratio"],
                               at.loc[at["setting"] == network, "ratio"])
            rows.append({"setting": network, "control": control, "depth": depth,
                         "ratio": c.ratio, "low": c.low, "high": c.high, "units": c.units,
                         "excluded": c.excluded, "verdict": c.verdict})
    return pd.DataFrame(rows)


def control_sweep(n_layers: int, batch: int, n_heads: int, sizes, scales, depths,
                  n_pools: int, n_paths: int, seed: int, n_iter: int = 50) -> pd.DataFrame:
    """The control (independent logits) for every token count n in `sizes` and logit scale
    in `scales`: `advantage` per (n, logit_std, depth) over `n_pools` independent pools,
    columns n, logit_std, depth, ratio, low, high, units, excluded, verdict."""
    frames = []
    for n in sizes:
        pools = {f"{n}|{s}": random_pool(n_layers, batch, n_heads, n, s, n_iter=n_iter)
                 for s in scales}
        adv = advantage(pooled_paths(pools, n_pools, depths, n_paths, seed))
        key = adv["setting"].str.split("|", expand=True)
        frames.append(adv.assign(n=key[0].astype(int), logit_std=key[1].astype(float))
                      .drop(columns="setting"))
    return pd.concat(frames, ignore_index=True)


def hidden_state_test(d_model: int, n_heads: int, n_layers: int, n_samples: int, n: int,
                      scales, networks: int, seed: int, n_iter: int = 50,
                      device: torch.device | str = "cpu") -> pd.DataFrame:
    """The direct test of the hypothesis in random networks: the relative residual of the
    hidden states (chapter 1's measure, float64) of random-weight networks with skip
    connections and pre-LayerNorm (no FFN), softmax against Sinkhorn on the same weights and
    inputs, per logit scale and layer, over `networks` independent weight draws (the unit;
    each draw is summarised by its median over the `n_samples` inputs)."""
    configs = [dict(normalization=name, logit_std=s, skip=True, layernorm=True)
               for name in NORMALIZATIONS for s in scales]
    stacks = sweep(configs, n_samples, n, d_model, n_heads, n_layers, n_iter, seed, device,
                   dtype=torch.float64, weight_draws=networks)
    return compare_table(stacks[stacks["layer"] > 0], unit="draw", by=["logit_std", "layer"],
                         floor=rounding_floor(torch.float64))


def verdicts(adv: pd.DataFrame) -> dict[str, str]:
    """Per setting, the sentence of `stats.describe` over depths."""
    return {s: describe(g, "depth") for s, g in adv.groupby("setting", sort=False)}


def sweep_sentence(sweep: pd.DataFrame) -> str:
    """How many (n, logit scale, depth) cells of `control_sweep` give each verdict."""
    counts = sweep["verdict"].value_counts()
    parts = [f"{WORDS[v]} in {counts[v]}" for v in VERDICTS if v in counts]
    return (f"Over n = {ranges(sweep['n'].unique())}, logit scales "
            f"{ranges(sweep['logit_std'].unique())} and depths {ranges(sweep['depth'].unique())}: "
            + ", ".join(parts) + f" of {len(sweep)} cells.")


def claims(adv: pd.DataFrame, independent: str, identity: str, beyond: pd.DataFrame,
           sweep: pd.DataFrame, hidden: pd.DataFrame, n: int) -> list[Claim]:
    """C6a (no Sinkhorn advantage for independent random matrices - parity or less agree
    with it: the paper's setting at every depth and the `control_sweep` over n and logit
    scale), C6b (the same with half identities) and C6d
    (the hypothesis in random networks with skip connections: attention computed from the
    previous layer's output gives Sinkhorn a larger advantage in path products of depth 2
    and more than independent random matrices do - `beyond_control`; depth 1 is one
    matrix, not a chain - and Sinkhorn keeps more rank in the hidden states themselves,
    `hidden_state_test`), from `advantage`; `n` is the control's token count."""
    found = {s: g["verdict"].tolist() for s, g in adv.groupby("setting", sort=False)}
    sentences = verdicts(adv)
    def no_lead(setting: str) -> str:
        return ("" if "more" in found[setting] else " No depth shows Sinkhorn ahead. Where Sinkhorn "
                "keeps less, this is not the paper's parity either: its random products decay "
                "faster than softmax's.")
    control = pd.concat([adv[adv["setting"] == independent], sweep])
    hidden_found = {f"logit scale {s:g}": describe(g, "layer", "layer")
                    for s, g in hidden.groupby("logit_std")}
    chain_verdict = claim_verdict("more", beyond["verdict"].tolist())
    chain_found = {s: describe(g, "depth", more="the networks' ratio is larger",
                               less="the networks' ratio is smaller")
                   for s, g in beyond.groupby("setting", sort=False)}
    hidden_verdict = claim_verdict("more", hidden["verdict"].tolist())

    return [
        Claim("C6a", "products of independent random matrices show no Sinkhorn advantage",
              claim_verdict("no more", control["verdict"].tolist()),
              f"The paper's setting (n = {n}, logit scale 1): {sentences[independent]}"
              + no_lead(independent) + " " + sweep_sentence(sweep)).with_numbers(
            control, figure="fig-control-ratio"),
        Claim("C6b", "the same with half of the factors replaced by the identity",
              claim_verdict("no more", found[identity]), sentences[identity] + no_lead(identity)
              ).with_numbers(adv[adv["setting"] == identity], figure="fig-control-ratio"),
        Claim("C6d", "the hypothesis: input dependence along a path produces the advantage "
              "(random networks with skip connections)",
              merge_verdicts([chain_verdict, hidden_verdict]),
              f"Path products, the networks' ratio Sinkhorn / softmax against that of "
              f"independent random matrices at the same logit scale ({chain_verdict}): "
              + " ".join(f"{s}: {v}" for s, v in chain_found.items())
              + " Depth 1 does not count: it is a single matrix, not a chain. Hidden states of "
              f"the same kind of networks, Sinkhorn against softmax ({hidden_verdict}): "
              + " ".join(f"{s}: {v}" for s, v in hidden_found.items())).with_numbers(
            pd.concat([beyond, hidden]), figure="fig-network-chains", measure=(
                "path products: the networks' ratio over the control's; hidden states: "
                "Sinkhorn / softmax; geometric mean")),
    ]
