"""The scoring head shared by the LAION aesthetic predictor and ImageReward.

Both references use `nn.Sequential(Linear, Dropout, Linear, Dropout, Linear, Dropout, Linear,
Linear)` (768/1024-1024-128-64-16-1) with their ReLUs commented out, so the head is affine at
eval time; keeping the same layout keeps the checkpoints' `layers.{0,2,4,6,7}` keys loadable.
"""
from __future__ import annotations

import torch
from torch import nn

_LINEAR_INDICES = (0, 2, 4, 6, 7)


def linear_head_from_state(state: dict[str, torch.Tensor], prefix: str = "layers.") -> nn.Sequential:
    """Build the head with sizes read from the weights, then load them strictly."""
    try:
        shapes = [tuple(state[f"{prefix}{i}.weight"].shape) for i in _LINEAR_INDICES]
    except KeyError as err:
        raise ValueError(f"scoring head: expected keys {prefix}{{0,2,4,6,7}}.weight/bias, missing {err}") from None
    linears = [nn.Linear(fan_in, fan_out) for fan_out, fan_in in shapes]
    head = nn.Sequential(linears[0], nn.Dropout(), linears[1], nn.Dropout(), linears[2], nn.Dropout(), linears[3], linears[4])
    head.load_state_dict({k.removeprefix(prefix): v for k, v in state.items() if k.startswith(prefix)})
    return head.eval()
