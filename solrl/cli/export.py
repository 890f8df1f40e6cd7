"""`solrl export`: a run's trained LoRA in peft and diffusers formats."""
from __future__ import annotations

import sys

import torch

EXPORT_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}  # the adapters train in float32


def run(args) -> int:
    from ..models import load_base_policy, load_trained_policy
    from ..models.lora_export import check_export, export_lora
    from ..training.checkpoint import load_checkpoint

    ckpt = load_checkpoint(args.run)
    policy, lcfg = load_trained_policy(ckpt)
    base = ckpt["config"]["model"].get("path") or getattr(policy, "default_hub_id", "the shipped toy base (solrl/assets/toy_base)")
    dtype = EXPORT_DTYPES[args.dtype]
    out = export_lora(policy, lcfg, args.out, base_model=base, dtype=dtype)
    print(f"exported the trained LoRA of {ckpt['_path']} to {out} in {args.dtype}: peft (adapter_config.json, "
          f"adapter_model.safetensors) and diffusers (pytorch_lora_weights.safetensors); scale alpha/r = "
          f"{lcfg.lora_alpha / lcfg.r:g} folded into lora_B")
    if not args.check:
        return 0
    result = check_export(out, policy, lambda: load_base_policy(ckpt), dtype=dtype)
    print(f"check: relative velocity difference to the trained policy (tolerance {result.tolerance:g})")
    print("\n".join(result.lines()))
    if not result.ok:
        print(f"error: a loader does not reproduce the trained policy from {out}; do not ship these files", file=sys.stderr)
    return 0 if result.ok else 1


def add_parser(sub) -> None:
    p = sub.add_parser("export", help="write a run's trained LoRA in peft and diffusers formats")
    p.add_argument("run", help="run directory or checkpoint file")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--dtype", choices=list(EXPORT_DTYPES), default="float32",
                   help="the files' dtype: float32 as trained, or bfloat16 (half the size, 8 significant bits)")
    p.add_argument("--check", action="store_true",
                   help="load the files back through peft and diffusers, print each route's difference; exit 1 if one fails")
    p.set_defaults(fn=run)
