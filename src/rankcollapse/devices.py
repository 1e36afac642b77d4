"""Which device a computation runs on: 'auto' (CUDA when present), 'cpu' or 'cuda'."""

from __future__ import annotations

import torch

DEVICES = ("auto", "cpu", "cuda")


def resolve_device(device: str | torch.device) -> torch.device:
    """'auto' -> CUDA when present, else CPU. Unknown names raise with the valid list."""
    if isinstance(device, torch.device):
        return device
    if device not in DEVICES:
        raise ValueError(f"unknown device {device!r}; valid devices: {', '.join(DEVICES)}")
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("device 'cuda' requested but torch.cuda.is_available() is False; "
                         "install a CUDA build of torch (see README) or use --device cpu")
    return torch.device(device)
