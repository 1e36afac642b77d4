"""Named execution profiles. Notebooks pick a name; every size lives here.

`ci`   : CPU, offline, the whole book in minutes on 2 cores (small sizes, fewer draws).
`full` : the paper's sizes (n = 128 tokens, d_model = 128, 4 heads, 24 layers,
         50 Sinkhorn iterations, 100 paths per depth); meant for one GPU.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch


@dataclass(frozen=True)
class Profile:
    name: str
    n_tokens: int  # sequence length n
    d_model: int
    n_heads: int
    depth: int  # number of attention layers in the random-weight stacks
    n_iter: int  # full Sinkhorn iterations (one row + one column normalization each)
    n_samples: int  # random inputs (or weight draws) per configuration
    n_paths: int  # sampled attention paths per depth

    def as_dict(self) -> dict:
        return asdict(self)


PROFILES: dict[str, Profile] = {
    "ci": Profile("ci", n_tokens=32, d_model=32, n_heads=2, depth=12, n_iter=50,
                  n_samples=32, n_paths=100),
    "full": Profile("full", n_tokens=128, d_model=128, n_heads=4, depth=24, n_iter=50,
                    n_samples=128, n_paths=100),
}

DEVICES = ("auto", "cpu", "cuda")


def get_profile(name: str) -> Profile:
    """The profile called `name`; a ValueError lists the valid names otherwise."""
    if name not in PROFILES:
        raise ValueError(f"unknown profile {name!r}; valid profiles: {', '.join(PROFILES)}")
    return PROFILES[name]


def resolve_device(device: str) -> torch.device:
    """'auto' -> CUDA when present, else CPU. Unknown names raise with the valid list."""
    if device not in DEVICES:
        raise ValueError(f"unknown device {device!r}; valid devices: {', '.join(DEVICES)}")
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("device 'cuda' requested but torch.cuda.is_available() is False; "
                         "install a CUDA build of torch (see README) or use --device cpu")
    return torch.device(device)
