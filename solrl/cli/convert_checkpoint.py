"""`solrl convert-checkpoint`: pickled checkpoints of earlier solrl rewritten as safetensors ones."""
from __future__ import annotations


def run(args) -> int:
    from ..training.checkpoint import convert_pickled

    written = convert_pickled(args.old, trust=args.trust)
    print("\n".join(f"wrote {p} (sealed)" for p in written))
    print(f"converted {len(written)} pickled checkpoint(s); the .pt files were left as they were: delete them once "
          "you have resumed or exported from the .safetensors ones")
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("convert-checkpoint", help="one-off: rewrite pickled checkpoints (.pt, earlier solrl) as safetensors ones")
    p.add_argument("old", help="a .pt checkpoint, or a run / checkpoints directory: every .pt without a .safetensors twin")
    p.add_argument("--trust", action="store_true", help="required: you trust the source of the pickles (they are read "
                   "with torch's weights-only unpickler, but a pickle is code)")
    p.set_defaults(fn=run)
