"""Chapter 4 as a function of its profile: every table, every figure's data, every value
its prose states and its claims, computed by `run` from the profile, the device and the
seed alone. The notebook shows them; it computes nothing."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import torch

from ...claim_rows import Claim
from ...names import bullets
from ...profiles import Profile
from ...stats import LEVEL, describe
from . import experiment as rm

# The glued names of the control's settings.
CONTROL_KEYS = {"ind": "independent", "idt": "independent, half identity",
                "signal": "independent, signal order"}


@dataclass(frozen=True)
class RandomMatrixControl:
    """What chapter 4 shows. Ratio tables are `stats.compare_table`s."""

    control: pd.DataFrame  # rank-1 residuals of path products, per setting, pool, depth, path
    advantage: pd.DataFrame  # the control's ratio Sinkhorn / softmax per setting and depth
    sweep: pd.DataFrame  # the ratio per size, logit scale and depth
    correlated: pd.DataFrame  # test (a): the ratio per correlation and depth
    chains: pd.DataFrame  # test (b): the ratio per network or control and depth
    chain_settings: list[str]  # test (b)'s curves in the order the figure draws them
    hidden: pd.DataFrame  # test (c): the hidden states' ratio per panel, scale and layer
    glue: dict[str, object]  # numbers the prose states
    text: dict[str, str]  # sentences the prose states (Markdown)
    claims: list[Claim]


def run(settings: Profile, device: torch.device, seed: int) -> RandomMatrixControl:
    """Chapter 4 under `settings` on `device`; every pool, network and path is drawn from
    `seed`."""
    layers, heads, n = settings.depth, settings.n_heads, settings.n_tokens
    batch = settings.ch4.pool_batch
    paths = dict(n_pools=settings.n_pools, depths=rm.path_depths(layers),
                 n_paths=settings.paths_per_pool, seed=seed)

    def pool(**options):
        return rm.random_pool(layers, batch, heads, n, settings.ch4.pool_scale,
                              n_iter=settings.n_iter, **options)

    control = rm.pooled_paths({CONTROL_KEYS["ind"]: pool(),
                               CONTROL_KEYS["idt"]: pool(identity=True)}, **paths)
    advantage = rm.advantage(control)
    sentences = rm.verdicts(advantage)
    signal = rm.pooled_paths({CONTROL_KEYS["signal"]: pool()}, order="signal", **paths)
    sentences |= rm.verdicts(rm.advantage(signal))

    sweep_depths = rm.sweep_depths(layers)
    sweep = rm.control_sweep(layers, batch, heads, settings.ch4.control_sizes,
                             settings.ch4.control_scales, sweep_depths, settings.n_pools,
                             settings.paths_per_pool, seed, settings.n_iter)
    correlated = rm.correlated_test(layers, batch, heads, n, settings.ch4.rhos,
                                    n_iter=settings.n_iter, **paths)
    chain = rm.chain_test(settings.d_model, heads, layers, batch, n, n_iter=settings.n_iter,
                          scales=settings.ch4.network_scales, device=device, **paths)
    stacks = {ln: rm.hidden_state_stacks(settings.d_model, heads, layers, settings.n_samples, n,
                                         settings.ch4.hidden_scales, settings.n_pools, seed, settings.n_iter,
                                         device, layernorm=ln) for ln in (True, False)}
    hidden = rm.hidden_state_panels(stacks)

    glue = {"ch4_layers": layers, "ch4_paths": settings.paths_per_pool, "ch4_heads": heads,
            "ch4_batch": batch, "ch4_pools": settings.n_pools,
            "ch4_margin": rm.PARITY_BAND[-1], "ch4_margin_low": rm.PARITY_BAND[0],
            "ch4_iter": settings.n_iter, "ch4_pool_scale": settings.ch4.pool_scale,
            "ch4_all_paths": settings.n_pools * settings.paths_per_pool,
            **{f"ch4_{k}_{f}": getattr(advantage[advantage.setting == CONTROL_KEYS[k]].ratio, f)()
               for k in ("ind", "idt") for f in ("min", "max")},
            "ch4_sweep_sizes": ", ".join(map(str, settings.ch4.control_sizes)),
            "ch4_sweep_scales": ", ".join(f"{s:g}" for s in settings.ch4.control_scales),
            "ch4_sweep_depths": ", ".join(map(str, sweep_depths)),
            "ch4_hidden_scales": ", ".join(f"{s:g}" for s in settings.ch4.hidden_scales),
            "ch4_network_scales": ", ".join(f"{s:g}" for s in settings.ch4.network_scales),
            "ch4_hidden_inputs": settings.n_samples, "ch4_level": LEVEL}
    text = ({f"ch4_{k}_verdict": sentences[label] for k, label in CONTROL_KEYS.items()}
            | {"ch4_sweep_verdict": rm.sweep_sentence(sweep),
               "ch4_corr_verdict": rm.correlated_sentence(correlated)}
            | {"ch4_networks": bullets(chain.verdicts),
               "ch4_beyond": bullets({rm.network_label(True, s): v
                                      for s, v in chain.beyond_verdicts.items()})}
            | {f"ch4_hidden_{'ln' if ln else 'noln'}": bullets({
                f"logit scale {s:g}": describe(g, "layer", "layer")
                for s, g in by_ln.groupby("logit_std", sort=False)})
               for ln, by_ln in hidden.groupby("layernorm", sort=False)})
    return RandomMatrixControl(control, advantage, sweep, correlated, chain.advantage,
                               chain.settings, hidden, glue, text,
                               rm.claims(control, sweep, settings))
