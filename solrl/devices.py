"""Dtype and device names as configs spell them ("bf16", "cuda:1", None = the best available)."""
from __future__ import annotations

import torch

DTYPES = {
    "float32": torch.float32, "fp32": torch.float32,
    "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
    "float16": torch.float16, "fp16": torch.float16,
}


def torch_dtype(dtype, what: str = "dtype") -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype not in DTYPES:
        raise ValueError(f"unknown {what} {dtype!r}; use one of {', '.join(DTYPES)}")
    return DTYPES[dtype]


def torch_device(device) -> torch.device:
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)
