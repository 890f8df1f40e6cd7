"""`solrl widen-toy`: a wider toy base that computes what the base computes (Net2WiderNet copies)."""
from __future__ import annotations

import json
from pathlib import Path


def run(args) -> int:
    import shutil

    from diffusers import SD3Transformer2DModel

    from ..models.toy import TOY_BASE_DIR
    from ..models.toy_autoencoder import AUTOENCODER_DIR
    from ..models.widen import widen_sd3_transformer

    src, out = Path(args.model_path or TOY_BASE_DIR), Path(args.out)
    if not (src / "config.json").exists():
        raise FileNotFoundError(f"--model-path {src}: no toy model there (config.json missing)")
    wide = widen_sd3_transformer(SD3Transformer2DModel.from_pretrained(str(src)), args.width, args.split_noise, args.seed)
    wide.save_pretrained(str(out), safe_serialization=True)
    if (src / AUTOENCODER_DIR).exists():
        shutil.copytree(src / AUTOENCODER_DIR, out / AUTOENCODER_DIR, dirs_exist_ok=True)
    info_file = src / "training.json"
    info = json.loads(info_file.read_text()) if info_file.exists() else {}
    kept = {k: v for k, v in info.items() if k == "sampling_shift" or k.startswith("text_")}  # how to sample and encode it
    record = {"what": f"{src} widened to width {args.width} by Net2WiderNet copies (solrl widen-toy); computes what "
                      "it computes, up to rounding, until trained further", **kept,
              "widened": {"from": str(src), "width": args.width, "split_noise": args.split_noise, "seed": args.seed,
                          "source_training": info}}
    (out / "training.json").write_text(json.dumps(record, indent=2) + "\n")
    params = sum(p.numel() for p in wide.parameters())
    print(f"wrote the toy widened to width {args.width} ({params / 1e6:.1f}M parameters) to {out}; train it further "
          f"with `solrl pretrain-toy --init {out} ...` so its copies part")
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("widen-toy", help="a wider toy base computing what the base computes (Net2WiderNet copies): "
                       "a trained model whose GEMMs dominate, for explore-cost studies")
    p.add_argument("--width", type=int, required=True, help="new width: a multiple of the model's (the toy's 128)")
    p.add_argument("--split-noise", type=float, default=0.5, help="how unequal the copies' shares of each input weight "
                   "are (0: equal; they always add up to the original)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--model-path", default=None, help="the model to widen; default: the shipped toy base")
    p.add_argument("--out", required=True, help="output model directory")
    p.set_defaults(fn=run)
