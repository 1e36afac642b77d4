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
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd
import torch

from ...measures import path_products, relative_residual, rounding_floor, sample_paths
from ...models import Switches, random_stack
from ...normalizations import NORMALIZATIONS, normalize
from ...profiles import Profile
from ...claim_rows import Claim
from ...primary_tests import run_part
from ...registry import HALF_IDENTITY, INDEPENDENT
from ...stats import (FOUND, MARGIN, WORDS, censored_logs, compare_groups, compare_table, describe,
                     family_level, ranges, unit_values)
from ...verdicts import results_sentence
from ..rank_collapse import random_tokens, sweep

# A pool maker: generator -> {normalization: attention (layers, batch, heads, n, n)}.
PoolMaker = Callable[[torch.Generator], dict[str, torch.Tensor]]
PARITY_BAND = (1 / (1 + MARGIN), 1 + MARGIN)  # the ratios the parity margin admits


def path_depths(depth: int) -> range:
    """The path depths of a stack of `depth` layers: 1 to `depth`."""
    return range(1, depth + 1)


def random_logits(n_layers: int, batch: int, n_heads: int, n: int, scale,
                  rho: float, generator: torch.Generator) -> torch.Tensor:
    """Gaussian logits `(layers, batch, heads, n, n)` with entries N(0, scale^2) and
    correlation `rho` between consecutive layers (rho = 0: independent); `scale` is one
    number or one per layer (a trained model's measured logit scales, say)."""
    if not 0.0 <= rho < 1.0:
        raise ValueError(f"rho must be in [0, 1); got {rho}")
    scales = torch.tensor(np.asarray(scale, dtype=float)).reshape(-1)
    if len(scales) not in (1, n_layers) or not (scales > 0).all():
        raise ValueError(f"scale must be one positive number or one per layer ({n_layers}); "
                         f"got {scales.tolist()}")
    g = torch.randn(n_layers, batch, n_heads, n, n, generator=generator, dtype=torch.float64)
    layers = [g[0]]
    for noise in g[1:]:
        layers.append(rho * layers[-1] + math.sqrt(1 - rho**2) * noise)
    return torch.stack(layers) * scales.reshape(-1, 1, 1, 1, 1)


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


def random_pool(n_layers: int, batch: int, n_heads: int, n: int, scale,
                rho: float = 0.0, identity: bool = False, *, n_iter: int) -> PoolMaker:
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
                 logit_std: float, n_iter: int, device: torch.device | str = "cpu"
                 ) -> PoolMaker:
    """Pools of attention recorded in a random-weight network (no FFN; with skips also
    pre-LayerNorm, as in a real block) on random inputs, computed in float64: one network
    and its inputs per pool, the same weights and inputs for both normalizations."""
    switches = Switches(skip=skip, ffn=False, layernorm=skip)

    @torch.no_grad()
    def make(generator: torch.Generator) -> dict[str, torch.Tensor]:
        x = random_tokens(batch, n, d_model, generator, device).double()
        weights_seed = int(torch.randint(2**31, (1,), generator=generator))
        return {name: random_stack(d_model, n_heads, n_layers, name, logit_std, switches,
                                   weights_seed, n_iter, device).double()(x, record=True)
                .attention.cpu() for name in NORMALIZATIONS}
    return make


def advantage(table: pd.DataFrame, floor: float = rounding_floor(torch.float64)
              ) -> pd.DataFrame:
    """Description per setting and depth: the comparison Sinkhorn / softmax over independent
    pools (`stats.compare_table`: each pool's median over its paths, t interval over pools,
    simultaneous over the depths of each setting). A pool whose median residual is at the
    rounding `floor` of the attention's dtype (the product is rank one to machine precision)
    is censored there."""
    return compare_table(table, unit="pool", by=["setting", "depth"], within=["setting"],
                         floor=floor)


def beyond_control(networks: pd.DataFrame, controls: pd.DataFrame, pairs: dict[str, str],
                   floor: float = rounding_floor(torch.float64), min_depth: int = 2
                   ) -> pd.DataFrame:
    """Per network setting and depth >= `min_depth`: is the Sinkhorn / softmax ratio of the
    networks' path products larger than that of independent random matrices at the same
    logit scale (`pairs`: network setting -> control setting)? Networks and control pools are
    independent groups (`stats.compare_groups` of the pools' log ratios, censored at the
    rounding `floor`: 'more' = the networks' ratio is the larger), the intervals
    simultaneous over every (setting, depth) of the table (description)."""
    wide = unit_values(pd.concat([networks, controls], ignore_index=True), "pool",
                       ["setting", "depth"])
    logs, _, _ = censored_logs(wide["softmax"], wide["sinkhorn"], floor)
    ratios = wide.assign(ratio=np.exp(logs))
    depths = [d for d in sorted(set(networks["depth"])) if d >= min_depth]
    level = family_level(len(pairs) * len(depths))
    rows = []
    for network, control in pairs.items():
        for depth in depths:
            at = ratios[ratios["depth"] == depth]
            c = compare_groups(at.loc[at["setting"] == control, "ratio"],
                               at.loc[at["setting"] == network, "ratio"], level=level)
            rows.append({"setting": network, "control": control, "depth": depth,
                         "ratio": c.ratio, "low": c.low, "high": c.high, "level": c.level,
                         "units": c.units, "verdict": c.found})
    return pd.DataFrame(rows)


def sweep_depths(n_layers: int) -> tuple[int, ...]:
    """The path depths of `control_sweep`: the shortest product (2), half and all the
    layers (each at least 2: depth 1 is one matrix, not a product)."""
    return tuple(sorted({2, max(2, n_layers // 2), n_layers}))


def control_sweep(n_layers: int, batch: int, n_heads: int, sizes, scales, depths,
                  n_pools: int, n_paths: int, seed: int, n_iter: int) -> pd.DataFrame:
    """The control (independent logits) for every token count n in `sizes` and logit scale
    in `scales`: `advantage` per (n, logit_std, depth) over `n_pools` independent pools,
    columns n, logit_std, depth, ratio, low, high, units, excluded, verdict."""
    frames = []
    for n in sizes:
        scale_of = {control_label(s): s for s in scales}
        pools = {label: random_pool(n_layers, batch, n_heads, n, s, n_iter=n_iter)
                 for label, s in scale_of.items()}
        adv = advantage(pooled_paths(pools, n_pools, depths, n_paths, seed))
        frames.append(adv.assign(n=n, logit_std=adv["setting"].map(scale_of))
                      .drop(columns="setting"))
    return pd.concat(frames, ignore_index=True)


def correlation_label(rho: float) -> str:
    """The setting name of random logits with correlation `rho` between layers (test (a))."""
    return f"ρ = {rho:g}"


def correlated_test(n_layers: int, batch: int, n_heads: int, n: int, rhos, n_pools: int,
                    depths, n_paths: int, seed: int, n_iter: int) -> pd.DataFrame:
    """Test (a): `advantage` of random logits (scale 1) with each correlation in `rhos`
    between consecutive layers, per (rho, depth); columns as `advantage` and rho."""
    rho_of = {correlation_label(r): r for r in rhos}
    table = pooled_paths({label: random_pool(n_layers, batch, n_heads, n, 1.0, rho=r,
                                             n_iter=n_iter) for label, r in rho_of.items()},
                         n_pools, depths, n_paths, seed)
    adv = advantage(table)
    return adv.assign(rho=adv["setting"].map(rho_of))


def correlated_sentence(adv: pd.DataFrame) -> str:
    """What `correlated_test` found: the ratio at the deepest path per rho, in how many
    (rho, depth) cells Sinkhorn is higher, and the verdict over depths at the largest rho."""
    deepest = adv[adv["depth"] == adv["depth"].max()].sort_values("rho")
    ratios = ", ".join(f"{r:.2f} (ρ = {rho:g})" for rho, r in zip(deepest["rho"],
                                                                  deepest["ratio"]))
    strongest = adv[adv["rho"] == adv["rho"].max()]
    higher = int((adv["verdict"] == "more").sum())
    return (f"At the deepest path (depth {adv['depth'].max()}) the ratio is {ratios}; "
            f"Sinkhorn higher in {higher or 'none'} of the {len(adv)} (ρ, depth) "
            f"cell{'s' if len(adv) != 1 else ''}. At the strongest correlation, "
            f"ρ = {adv['rho'].max():g}: {describe(strongest, 'depth')}")


def hidden_state_stacks(d_model: int, n_heads: int, n_layers: int, n_samples: int, n: int,
                        scales, networks: int, seed: int, n_iter: int,
                        device: torch.device | str = "cpu", layernorm: bool = True
                        ) -> pd.DataFrame:
    """The direct test of the hypothesis in random networks: the relative residual of the
    hidden states (chapter 1's measure, float64) of random-weight networks with skip
    connections, with or without pre-LayerNorm (no FFN), softmax and Sinkhorn on the same
    weights and inputs, per logit scale and layer, for `networks` independent weight draws
    (column draw, the unit) on the same `n_samples` inputs (`rank_collapse.sweep`)."""
    configs = [dict(normalization=name, logit_std=s, skip=True, layernorm=layernorm)
               for name in NORMALIZATIONS for s in scales]
    return sweep(configs, n_samples, n, d_model, n_heads, n_layers, n_iter, seed, device,
                 dtype=torch.float64, weight_draws=networks)


HIDDEN_TASKS = {True: "with LayerNorm", False: "without LayerNorm"}  # panels of test (c)


def hidden_state_panels(stacks: dict[bool, pd.DataFrame]) -> pd.DataFrame:
    """`hidden_state_comparisons` of each architecture (`stacks`: LayerNorm ->
    `hidden_state_stacks`), one table: columns layernorm, task (the panel, `HIDDEN_TASKS`)
    and setting (the curve, `scale_label`'s logit scale)."""
    table = pd.concat([hidden_state_comparisons(s).assign(layernorm=ln, task=HIDDEN_TASKS[ln])
                       for ln, s in stacks.items()], ignore_index=True)
    return table.assign(setting=table["logit_std"].map("logit scale {:g}".format))


def hidden_state_comparisons(stacks: pd.DataFrame) -> pd.DataFrame:
    """Sinkhorn / softmax per logit scale and layer of `hidden_state_stacks`, over weight
    draws (each summarised by its median over the inputs), intervals simultaneous over the
    table (description)."""
    return compare_table(stacks[stacks["layer"] > 0], unit="draw", by=["logit_std", "layer"],
                         floor=rounding_floor(torch.float64))


def registered_paths(table: pd.DataFrame, setting: str, task: str) -> pd.DataFrame:
    """One setting of a `pooled_paths` table as registered data: per pool and depth the two
    normalizations' medians over paths, under the task name `task`."""
    wide = unit_values(table[table["setting"] == setting], "pool", ["depth"])
    return wide.rename(columns={"pool": "unit", "depth": "position"}).assign(task=task)


@dataclass(frozen=True)
class ChainTest:
    """Test (b): path products of random networks, pure and with skips and LayerNorm, at
    each logit scale, and of independent random matrices at the same scales (the control)."""

    networks: pd.DataFrame  # `pooled_paths`, settings `network_label(skip, scale)`
    controls: pd.DataFrame  # `pooled_paths`, settings `control_label(scale)`
    scales: tuple[float, ...]

    @property
    def advantage(self) -> pd.DataFrame:
        """`advantage` of the networks, then of the controls (one table, the figure's)."""
        return pd.concat([advantage(self.networks), advantage(self.controls)])

    @property
    def settings(self) -> list[str]:
        """The curves in order: pure networks, networks with skips, controls."""
        return [*dict.fromkeys(self.networks["setting"]), *map(control_label, self.scales)]

    @property
    def verdicts(self) -> dict[str, str]:
        """Per network setting, Sinkhorn / softmax over depths (`verdicts`)."""
        return verdicts(advantage(self.networks))

    @property
    def beyond(self) -> pd.DataFrame:
        """`beyond_control` of the networks with skips against the control at their scale."""
        return beyond_control(self.networks, self.controls,
                              {network_label(True, s): control_label(s) for s in self.scales})

    @property
    def beyond_verdicts(self) -> dict[float, str]:
        """Per logit scale, the sentence of `beyond` over depths."""
        beyond = self.beyond
        return {s: describe(beyond[beyond["setting"] == network_label(True, s)], "depth",
                            more="the network's ratio higher",
                            less="the network's ratio lower") for s in self.scales}


def chain_test(d_model: int, n_heads: int, n_layers: int, batch: int, n: int, n_pools: int,
               depths, n_paths: int, seed: int, n_iter: int,
               scales: tuple[float, ...], device: torch.device | str = "cpu") -> ChainTest:
    """Test (b) (`ChainTest`): `network_pool` without and with skips at each logit scale in
    `scales`, and `random_pool` at each, every setting over `n_pools` pools."""
    networks = {network_label(skip, s): network_pool(d_model, n_heads, n_layers, batch, n,
                                                     skip, s, n_iter, device)
                for skip in (False, True) for s in scales}
    controls = {control_label(s): random_pool(n_layers, batch, n_heads, n, s, n_iter=n_iter)
                for s in scales}
    return ChainTest(*(pooled_paths(pools, n_pools, depths, n_paths, seed)
                       for pools in (networks, controls)), tuple(scales))


def network_label(skip: bool, scale: float) -> str:
    """The setting name of a random network of chapter 4 (test (b))."""
    return f"{'skip + LN' if skip else 'pure'}, logit scale {scale:g}"


def control_label(scale: float) -> str:
    """The setting name of independent random matrices at a logit scale."""
    return f"independent, logit scale {scale:g}"


def verdicts(adv: pd.DataFrame) -> dict[str, str]:
    """Per setting, the sentence of `stats.describe` over depths."""
    return {s: describe(g, "depth") for s, g in adv.groupby("setting", sort=False)}


def sweep_sentence(sweep: pd.DataFrame) -> str:
    """How many (n, logit scale, depth) cells of `control_sweep` give each result."""
    counts = sweep["verdict"].value_counts()
    parts = [f"{WORDS[v]} in {counts[v]}" for v in FOUND if v in counts]
    return (f"Over n = {ranges(sweep['n'].unique())}, logit scales "
            f"{ranges(sweep['logit_std'].unique())} and depths {ranges(sweep['depth'].unique())}"
            " (description, intervals simultaneous over the cells), Sinkhorn / softmax: "
            + ", ".join(parts) + f" of {len(sweep)} cell{'s' if len(sweep) != 1 else ''}.")


def claims(control: pd.DataFrame, sweep: pd.DataFrame, profile: Profile) -> list[Claim]:
    """C6a and C6b: the registered tests of parity on the control's pools (`control`,
    settings 'independent' and 'independent, half identity'). The sweep over n and logit
    scale, and the random networks of tests (b) and (c), are description: the paper's
    hypothesis (C6d) is decided on trained models in chapter 6."""
    c6a = run_part("C6a", "random matrices", registered_paths(control, "independent", INDEPENDENT),
              profile)
    c6b = run_part("C6b", "random matrices, half identity",
              registered_paths(control, "independent, half identity", HALF_IDENTITY), profile)
    where = (f"(n = {profile.n_tokens}, logit scale {profile.ch4.pool_scale:g}, "
             f"depths 2–{profile.depth})")
    return [
        Claim.of("C6a", c6a, f"Random products {where}: " + results_sentence(c6a, "pools")
                 + " " + sweep_sentence(sweep), figure="fig-control-ratio"),
        Claim.of("C6b", c6b, f"Random products {where}: "
                 + results_sentence(c6b, "pools"), figure="fig-control-ratio"),
    ]
