"""GPU check: explore-engine speed and a few sol_rl iterations on a real-size random-weight transformer.

    .venv/bin/python bench/gpu_check.py [--arch sd35m|sana16b] [--out gpu_check.json]   # one GPU, offline
    .venv/bin/python bench/gpu_check.py --dry-run      # CPU: parse, size the architecture, print the plan
    .venv/bin/python bench/gpu_check.py --tiny --device cpu --out /tmp/g.json   # the whole path on a tiny model

The transformer is the released architecture (SD3.5-Medium or SANA-1.6B, built from its config,
random weights, nothing downloaded) behind tiny text encoders and a small VAE, so the figures are
the transformer's. Per explore recipe (bf16, int8, fp8, and nvfp4 only where a real kernel exists):
kernel, forward ms, images/s at the explore step budget, sync ms, and the velocity's relative error
against the unmerged LoRA policy. Then `--iterations` sol_rl iterations through solrl.trainer.Trainer
with a random-weight CNN reward. Everything is printed and written to --out as JSON.
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from solrl.models.random_pipelines import REAL_TRANSFORMERS, TINY_TRANSFORMERS
from solrl.rewards.base import Reward, RewardResult

VAE_LEVELS = {"sd3": 4, "sana": 6}    # VAE factor 8 (SD3's KL) and 32 (SANA's DC-AE), as released
PROMPTS = ["a photo of a red bicycle leaning on a brick wall", "an astronaut riding a horse, oil painting",
           "a bowl of ramen with chopsticks, studio light", "two cats sleeping on a blue sofa"]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--arch", choices=sorted(REAL_TRANSFORMERS), default="sd35m")
    p.add_argument("--tiny", action="store_true", help="the tiny test transformer instead (CPU smoke run of this script)")
    p.add_argument("--device", default="cuda")
    p.add_argument("--resolution", type=int, default=512)
    p.add_argument("--batch", type=int, default=8, help="images per forward in the speed test")
    p.add_argument("--steps", type=int, default=6, help="explore step budget timed per recipe")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--recipes", default="bf16,int8,fp8,nvfp4")
    p.add_argument("--iterations", type=int, default=2, help="sol_rl iterations through the trainer")
    p.add_argument("--out", default="gpu_check.json")
    p.add_argument("--dry-run", action="store_true", help="no model run: size the architecture and print the plan")
    args = p.parse_args(argv)
    args.family, args.transformer = ("sd3", TINY_TRANSFORMERS["sd3"]) if args.tiny else REAL_TRANSFORMERS[args.arch]
    args.vae_levels = 2 if args.tiny else VAE_LEVELS[args.family]
    if args.tiny:
        args.resolution = min(args.resolution, 32)
    return args


def parameter_count(family: str, config: dict) -> int:
    """Parameters of the transformer, counted on the meta device (no memory, no weights)."""
    import diffusers

    cls = {"sd3": diffusers.SD3Transformer2DModel, "sana": diffusers.SanaTransformer2DModel}[family]
    with torch.device("meta"):
        return sum(p.numel() for p in cls(**config).parameters())


def environment(device: str) -> dict:
    env = {"torch": torch.__version__, "python": platform.python_version(), "device": device}
    if torch.device(device).type == "cuda":
        env.update(gpu=torch.cuda.get_device_name(device), capability=".".join(map(str, torch.cuda.get_device_capability(device))),
                   memory_gib=round(torch.cuda.get_device_properties(device).total_memory / 2**30, 1))
    return env


def _sync(device):
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def _timed(fn, device, reps: int) -> float:
    fn()                                   # warm-up (kernels, caches)
    times = []
    for _ in range(reps):
        _sync(device)
        start = time.perf_counter()
        fn()
        _sync(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def build_model_dir(args, root: Path) -> Path:
    from solrl.models.random_pipelines import build_random_pipeline

    path = root / "pipeline"
    start = time.perf_counter()
    init_device = args.device if torch.device(args.device).type == "cuda" else "cpu"
    with torch.device(init_device):          # random init on the GPU: seconds instead of minutes
        pipe = build_random_pipeline(args.family, transformer_config=args.transformer, vae_levels=args.vae_levels)
    if torch.device(args.device).type == "cuda":
        pipe.to(torch.bfloat16)
    pipe.save_pretrained(str(path))
    del pipe
    print(f"built and saved the random pipeline in {time.perf_counter() - start:.1f} s")
    return path


def engine_speed(args, model_dir: Path) -> dict:
    from solrl.models import load_policy
    from solrl.models.lora import ROLLOUT, adapter, add_policy_adapters, lora_config
    from solrl.precision.engine import ExploreEngine
    from solrl.precision.linear import get_recipe, select_kernel

    dtype = "bfloat16" if torch.device(args.device).type == "cuda" else "float32"
    policy = load_policy(args.family, str(model_dir), dtype=dtype, device=args.device, resolution=args.resolution)
    add_policy_adapters(policy.transformer, lora_config(32, 64, "gaussian", list(policy.lora_target_modules)))
    with torch.no_grad():   # a non-zero LoRA, so merging matters
        for name, p in policy.transformer.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 1e-3)
    prompts = [PROMPTS[i % len(PROMPTS)] for i in range(args.batch)]
    g = torch.Generator().manual_seed(0)
    x = torch.randn(args.batch, *policy.sample_shape, generator=g).to(args.device)
    t = torch.full((args.batch,), 0.7, device=args.device)
    cond = policy.encode_prompts(prompts)
    with torch.no_grad(), adapter(policy.transformer, ROLLOUT):
        v_ref = policy.velocity(x, t, cond).float()
        ref_ms = _timed(lambda: policy.velocity(x, t, cond), args.device, args.reps) * 1000
    results = {"lora_policy": {"forward_ms": round(ref_ms, 2), "kernel": f"peft LoRA unmerged, {dtype} weights"}}
    for name in args.recipes.split(","):
        kernel = select_kernel(get_recipe(name, args.device), args.device)
        if not kernel.real:
            results[name] = {"skipped": kernel.note}
            print(f"{name}: skipped ({kernel.note})")
            continue
        results[name] = _measure(ExploreEngine(policy, name), policy, args, (x, t, cond), v_ref, ref_ms)
        print(f"{name}: {results[name]}")
        if torch.device(args.device).type == "cuda":
            torch.cuda.empty_cache()
    return results


def _measure(engine, policy, args, inputs, v_ref, ref_ms) -> dict:
    from solrl.generation import generate

    prompts = [PROMPTS[i % len(PROMPTS)] for i in range(args.batch)]
    with torch.no_grad():
        err = float((engine.velocity(*inputs).float() - v_ref).norm() / v_ref.norm())
        fwd = _timed(lambda: engine.velocity(*inputs), args.device, args.reps)
        gen = _timed(lambda: generate(policy, prompts, list(range(args.batch)), args.steps, velocity=engine.velocity,
                                      batch_size=args.batch), args.device, max(1, args.reps - 1))
    sync = statistics.median(engine.sync(policy) for _ in range(3))
    return {"kernel": engine.kernel.name, "real": engine.kernel.real, "note": engine.kernel.note,
            "forward_ms": round(fwd * 1000, 2), "speedup_vs_lora_policy": round(ref_ms / (fwd * 1000), 3),
            "images_per_s": round(args.batch / gen, 2), "sync_ms": round(sync * 1000, 1),
            "velocity_rel_error": round(err, 5), "quantized_layers": len(engine.report.quantized),
            "kept_layers": len(engine.report.skipped)}


def sol_rl_iterations(args, model_dir: Path, root: Path) -> list[dict]:
    from solrl.config import load_config
    from solrl.rewards.base import REWARDS
    from solrl.trainer import Trainer

    if "gpu_check_random_cnn" not in REWARDS:
        REWARDS.register("gpu_check_random_cnn")(RandomCNNReward)
    prompt_file = root / "prompts.txt"
    prompt_file.write_text("\n".join(PROMPTS) + "\n")
    cuda = torch.device(args.device).type == "cuda"
    recipe = "fp8" if cuda and torch.cuda.get_device_capability(args.device) >= (8, 9) else "int8"
    cfg = load_config(None, [
        f"model.name={args.family}", f"model.path={model_dir}", f"model.device={args.device}",
        f"model.dtype={'bfloat16' if cuda else 'float32'}", f"model.resolution={args.resolution}",
        f"model.gradient_checkpointing={str(cuda).lower()}", f"out_dir={root / 'run'}", "reward.name=gpu_check_random_cnn",
        f"sampling.batch_size={args.batch}", "sampling.steps=10", f"train.autocast_bf16={str(cuda).lower()}",
        f"lora.target_modules=[{','.join(_family_class(args.family).lora_target_modules)}]",
        "train.prompts_per_iter=2", "train.group_size=4", "train.micro_batch=4", "train.timestep_fraction=0.2",
        f"train.prompts={prompt_file}", f"eval.split={prompt_file}", "rollout.family=sol_rl",
        f"rollout.explore_seeds={2 * args.batch if not args.tiny else 8}", "rollout.explore_steps=6",
        f"rollout.explore_precision={recipe}",
    ])
    trainer = Trainer(cfg, quiet=True)
    records = []
    for it in range(args.iterations):
        record = trainer.run_iteration(it)
        keep = ("reward_mean", "loss", "grad_norm", "proxy_full_spearman", "seconds_explore", "seconds_regenerate",
                "seconds_train", "seconds_sync", "seconds_iteration", "images_per_second")
        row = {"iteration": it + 1, "explore_precision": recipe,
               **({k: record.get(k) for k in keep} if record else {"skipped": True})}
        print(f"sol_rl iteration {it + 1}: {row}")
        records.append(row)
    return records


def _family_class(family):
    from solrl.models.diffusers_families import FAMILIES

    return FAMILIES[family]


class RandomCNNReward(Reward):
    """A fixed random conv net scoring images: a stand-in for a reward model, with no download."""

    name = "gpu_check_random_cnn"

    def __init__(self):
        torch.manual_seed(1234)
        self.net = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 5, stride=4), torch.nn.GELU(),
                                       torch.nn.Conv2d(16, 32, 3, stride=2), torch.nn.AdaptiveAvgPool2d(1),
                                       torch.nn.Flatten(), torch.nn.Linear(32, 1))

    @torch.no_grad()
    def score(self, images, prompts):
        net = self.net.to(images.device)
        return RewardResult(net(images.float() * 2 - 1).squeeze(1).float().cpu())


def main(argv=None) -> dict:
    args = parse_args(argv)
    params = parameter_count(args.family, args.transformer)
    plan = {"arch": "tiny" if args.tiny else args.arch, "family": args.family, "transformer_parameters": params,
            "resolution": args.resolution, "batch": args.batch, "explore_steps": args.steps,
            "recipes": args.recipes.split(","), "sol_rl_iterations": args.iterations, "out": args.out}
    print(json.dumps(plan, indent=2))
    if args.dry_run:
        return {"plan": plan}
    report = {"plan": plan, "environment": environment(args.device)}
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="solrl_gpu_check_") as tmp:
        root = Path(tmp)
        model_dir = build_model_dir(args, root)
        report["explore_engine"] = engine_speed(args, model_dir)
        if torch.device(args.device).type == "cuda":
            torch.cuda.empty_cache()
        report["sol_rl"] = sol_rl_iterations(args, model_dir, root)
    report["seconds_total"] = round(time.perf_counter() - start, 1)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out} ({report['seconds_total']} s)")
    return report


if __name__ == "__main__":
    main()
