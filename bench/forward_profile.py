"""Where one forward of the toy transformer spends its time, fp32 against bf16, on this CPU.

    .venv/bin/python bench/forward_profile.py [--batch 48] [--width W] [--out runs/forward_profile.md]

Why: a lower-precision explore only speeds what it makes cheaper. On a model as narrow as the toy's (width
128, 4 heads of 32) the GEMMs are a minority of a forward; the rest (GELU, attention, norms, copies) decides
how far the explore cost per image-step c can fall. The model is the shipped base without
LoRA (the bf16 engine merges it into plain layers), at the rollout's batch, one prompt's embeddings repeated.
Reports median seconds per forward (eager, compiled whole, and eager with the linear layers fed contiguous
inputs), the profiler's self time per aten op (eager; the profiler adds overhead, so read its figures as
shares), and one GEMM at wider widths in fp32, bf16 and int8.
--width W profiles a randomly initialised toy as wide as W instead (heads of 64; timings only).
"""
from __future__ import annotations

import argparse
import copy
import datetime
import platform
import statistics
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from solrl.models.toy import ToyPolicy, build_toy_transformer
from solrl.precision.linear import ContiguousLinear
from solrl.precision.recipes import cpu_label

GROUPS = {  # aten op -> what it is in a transformer block
    "addmm": "GEMM", "mm": "GEMM", "bmm": "GEMM",
    "_scaled_dot_product_flash_attention_for_cpu": "attention", "gelu": "GELU (feed-forward)",
    "native_layer_norm": "layer norm", "copy_": "copies and casts", "cat": "copies and casts",
}


def median_seconds(fn, reps: int, warmup: int = 3) -> float:
    """Median seconds of `fn()` over `reps` calls, after `warmup` calls (compilation, caches)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def forward_seconds(policy, model, x, t, cond, reps: int) -> float:
    policy.transformer = model
    with torch.no_grad():
        return median_seconds(lambda: policy.velocity(x, t, cond), reps)


def contiguous_linear_inputs(model):
    """A copy of `model` whose linear layers are the explore engine's ContiguousLinear (a non-contiguous input
    made contiguous first: one 2-D product instead of a batched one with the weight broadcast per sample)."""
    model = copy.deepcopy(model)
    for layer in model.modules():
        if type(layer) is torch.nn.Linear:
            layer.__class__ = ContiguousLinear   # the same parameters; only forward differs
    return model


def op_times(policy, model, x, t, cond, reps: int = 5) -> dict[str, float]:
    """Profiler self seconds per forward, grouped (GROUPS; everything else is 'other elementwise')."""
    policy.transformer = model
    with torch.no_grad(), profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(reps):
            policy.velocity(x, t, cond)
    groups: dict[str, float] = {}
    for event in prof.key_averages():
        if event.key.startswith("aten::"):
            group = GROUPS.get(event.key[len("aten::"):], "other elementwise")
            groups[group] = groups.get(group, 0.0) + event.self_cpu_time_total / 1e6 / reps
    return groups


def gemm_ceiling(rows: int, widths=(128, 512, 2048), reps: int = 20) -> list[tuple[int, float, float, float]]:
    """(width, fp32 ms, bf16 ms, int8 ms) of one [rows, width] x [width, 4 width] product, the feed-forward's
    first GEMM at that width: how much a lower-precision matrix unit saves where GEMMs are all there is (the
    limit of c as a model widens). int8 is torch._int_mm alone, without quantizing the activations."""
    out = []
    for width in widths:
        a, b = torch.randn(rows, width), torch.randn(width, 4 * width)
        cases = {"fp32": (a, b, torch.mm), "bf16": (a.bfloat16(), b.bfloat16(), torch.mm),
                 "int8": (a.clamp(-1, 1).mul(127).to(torch.int8), b.clamp(-1, 1).mul(127).to(torch.int8), torch._int_mm)}
        ms = {name: median_seconds(lambda: op(x, w), reps) * 1e3 for name, (x, w, op) in cases.items()}
        out.append((width, ms["fp32"], ms["bf16"], ms["int8"]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=48, help="images per forward (the toy presets' sampling.batch_size)")
    parser.add_argument("--reps", type=int, default=9)
    parser.add_argument("--width", type=int, default=None,
                        help="profile a randomly initialised transformer this wide instead of the shipped base")
    parser.add_argument("--out", default=None, help="markdown file to write (else print only)")
    args = parser.parse_args()

    policy = ToyPolicy.from_pretrained()
    if args.width:
        policy.transformer = build_toy_transformer(0, policy.sample_shape, args.width)
    base = policy.transformer.eval().requires_grad_(False)
    params = sum(p.numel() for p in base.parameters()) / 1e6
    description = (f"a randomly initialised toy of width {args.width} ({params:.1f}M parameters, timings only)" if args.width
                   else f"the shipped base ({params:.1f}M parameters)")
    cond = policy.encode_prompts(["a red circle to the left of a blue square"] * args.batch)
    x = torch.randn(args.batch, *policy.sample_shape, generator=torch.Generator().manual_seed(0))
    t = torch.full((args.batch,), 0.5)
    models = {"fp32": (base, torch.float32), "bf16": (copy.deepcopy(base).to(torch.bfloat16), torch.bfloat16)}
    eager, compiled, contiguous, ops = {}, {}, {}, {}
    for name, (model, dtype) in models.items():
        inputs = (x.to(dtype), t, cond)
        eager[name] = forward_seconds(policy, model, *inputs, args.reps)
        ops[name] = op_times(policy, model, *inputs)
        compiled[name] = forward_seconds(policy, torch.compile(copy.deepcopy(model)), *inputs, args.reps)
        contiguous[name] = forward_seconds(policy, contiguous_linear_inputs(model), *inputs, args.reps)

    rows = sorted(set(ops["fp32"]) | set(ops["bf16"]), key=lambda g: -ops["fp32"].get(g, 0.0))
    total = {name: sum(groups.values()) for name, groups in ops.items()}
    lines = [
        "# One forward of the toy transformer: fp32 against bf16",
        "",
        f"Measured {datetime.date.today()} on {cpu_label()}, {platform.machine()}, {torch.get_num_threads()} threads, "
        f"torch {torch.__version__}. Command: `.venv/bin/python bench/forward_profile.py --batch {args.batch}"
        f"{f' --width {args.width}' if args.width else ''}{' --out ' + args.out if args.out else ''}`; {description} without "
        f"LoRA, batch {args.batch}, medians of {args.reps}.",
        "",
        "| forward | fp32 ms | bf16 ms | bf16 / fp32 |",
        "|---|---|---|---|",
        f"| eager | {eager['fp32'] * 1e3:.1f} | {eager['bf16'] * 1e3:.1f} | {eager['bf16'] / eager['fp32']:.2f} |",
        f"| compiled whole | {compiled['fp32'] * 1e3:.1f} | {compiled['bf16'] * 1e3:.1f} | {compiled['bf16'] / compiled['fp32']:.2f} |",
        f"| eager, linear inputs made contiguous | {contiguous['fp32'] * 1e3:.1f} | {contiguous['bf16'] * 1e3:.1f} | "
        f"{contiguous['bf16'] / contiguous['fp32']:.2f} |",
        "",
        "Eager, profiler self time per forward by kind of op (the profiler's overhead included; read as shares):",
        "",
        "| op | fp32 ms (share) | bf16 ms (share) | bf16 / fp32 |",
        "|---|---|---|---|",
    ]
    for group in rows:
        a, b = ops["fp32"].get(group, 0.0), ops["bf16"].get(group, 0.0)
        lines.append(f"| {group} | {a * 1e3:.1f} ({a / total['fp32']:.0%}) | {b * 1e3:.1f} ({b / total['bf16']:.0%}) | "
                     f"{b / a:.2f} |" if a else f"| {group} | 0 | {b * 1e3:.1f} | |")
    gemm_free = (total["bf16"] - ops["bf16"].get("GEMM", 0.0)) / total["fp32"]
    lines += ["", f"- Were bf16's GEMMs free, its forward would still cost {gemm_free:.2f} of fp32's by the profiler's "
              "times: the floor a GEMM-only speed-up leaves for the explore cost per image-step on this model."]
    rows_per_gemm = args.batch * 64   # the image stream's tokens (8 x 8) per batch
    lines += ["", f"The GEMM alone, [{rows_per_gemm}, width] x [width, 4 width] (the feed-forward's first product at "
              "that width; int8 is torch._int_mm without quantizing the activations): the limit of c where GEMMs "
              "are all there is.", "", "| width | fp32 ms | bf16 ms | int8 ms | bf16 / fp32 | int8 / fp32 |", "|---|---|---|---|---|---|"]
    for width, fp32, bf16, int8 in gemm_ceiling(rows_per_gemm):
        lines.append(f"| {width} | {fp32:.2f} | {bf16:.2f} | {int8:.2f} | {bf16 / fp32:.2f} | {int8 / fp32:.2f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
