"""GPU acceptance run (issue 16): explore engines against the policy, eager and compiled; naive_scaling vs
sol_rl rollout seconds at the paper's shape; a few sol_rl iterations; one JSON.

    bash bench/gpu_check.sh                                  # one GPU, offline: SD3.5-M size, then SANA-1.6B size
    .venv/bin/python bench/gpu_check.py --arch sd35m --out gpu_check.json
    .venv/bin/python bench/gpu_check.py --dry-run            # CPU: size the architecture, print the plan
    .venv/bin/python bench/gpu_check.py --tiny --device cpu --out /tmp/g.json   # the whole path on a tiny model

The transformer is the released architecture (SD3.5-Medium or SANA-1.6B, built from its config,
random weights, nothing downloaded) behind tiny text encoders and a small VAE, so the figures are
the transformer's. Sections, each timed and skipped (with the reason) once `--budget-seconds` is spent:
- forward: the LoRA policy (peft, unmerged) and each explore recipe with real kernels (bf16, fp8, int8;
  nvfp4 only where a real kernel exists), eager and compiled (each transformer block by inductor),
  forward ms and the ratio to the policy's forward at the same compile setting, compile seconds;
- rollout: one prompt group at the paper's shape (N 96 explored in the fastest real low-precision
  recipe at 6 steps, K 24 regenerated at 10; naive_scaling samples all 96 at 10), eager and compiled,
  through solrl's own run_rollout: `rollout.naive_scaling_seconds` and `rollout.sol_rl_seconds`;
- sol_rl: `--iterations` iterations through solrl.trainer.Trainer with a random-weight CNN reward.
What the machine lacks (diffusers, peft, a CUDA device) is said up front; docs/gpu-acceptance.md
gives the offline install from wheels brought along.
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
    p.add_argument("--arch", default="sd35m", help=f"one or more of {', '.join(sorted(REAL_TRANSFORMERS))}, comma-separated")
    p.add_argument("--arch-sections", default="", help="per-arch sections, e.g. sana16b=forward,sol_rl (default: --sections)")
    p.add_argument("--tiny", action="store_true", help="the tiny test transformer instead (CPU smoke run of this script)")
    p.add_argument("--device", default="cuda")
    p.add_argument("--resolution", type=int, default=1024)
    p.add_argument("--batch", type=int, default=4, help="images per forward in the forward timing")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--recipes", default="bf16,fp8,int8,nvfp4")
    p.add_argument("--compile", default="eager,compiled", help="compile settings to time: eager, compiled or both")
    p.add_argument("--scope", default="blocks", choices=["blocks", "model"], help="what 'compiled' compiles (solrl/compile.py)")
    p.add_argument("--sections", default="forward,rollout,sol_rl", help="which sections to run")
    p.add_argument("--explore-seeds", type=int, default=96, help="N of the rollout section (the paper's 96)")
    p.add_argument("--group-size", type=int, default=24, help="K of the rollout section (the paper's 24)")
    p.add_argument("--rollout-batch", type=int, default=24, help="images per forward in the rollout section")
    p.add_argument("--iterations", type=int, default=2, help="sol_rl iterations through the trainer")
    p.add_argument("--budget-seconds", type=float, default=420, help="sections starting after this are skipped")
    p.add_argument("--out", default="gpu_check.json")
    p.add_argument("--dry-run", action="store_true", help="no model run: size the architecture and print the plan")
    args = p.parse_args(argv)
    args.archs = ["tiny"] if args.tiny else args.arch.split(",")
    unknown = [a for a in args.archs if a != "tiny" and a not in REAL_TRANSFORMERS]
    if unknown:
        p.error(f"unknown --arch {unknown[0]!r}; choose from {', '.join(sorted(REAL_TRANSFORMERS))}")
    args.sections_of = dict(item.split("=", 1) for item in args.arch_sections.split() if "=" in item)
    select_arch(args, args.archs[0])
    if args.tiny:
        args.resolution = min(args.resolution, 32)
        args.explore_seeds, args.group_size, args.rollout_batch = min(args.explore_seeds, 8), min(args.group_size, 4), 4
    return args


def select_arch(args, arch: str) -> None:
    args.family, args.transformer = ("sd3", TINY_TRANSFORMERS["sd3"]) if arch == "tiny" else REAL_TRANSFORMERS[arch]
    args.vae_levels = 2 if arch == "tiny" else VAE_LEVELS[args.family]


def missing_pieces(device: str) -> list[str]:
    """What this machine lacks for the run, said before anything is built."""
    import importlib.util

    missing = [f"python package {name}" for name in ("diffusers", "peft", "transformers", "safetensors", "scipy", "yaml")
               if importlib.util.find_spec(name) is None]
    if torch.device(device).type == "cuda" and not torch.cuda.is_available():
        missing.append("a CUDA device (torch.cuda.is_available() is False)")
    return missing


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


def _policy(args, model_dir: Path, compiled: bool):
    from solrl.compile import compile_transformer
    from solrl.models import load_policy
    from solrl.models.lora import add_policy_adapters, lora_config

    dtype = "bfloat16" if torch.device(args.device).type == "cuda" else "float32"
    policy = load_policy(args.family, str(model_dir), dtype=dtype, device=args.device, resolution=args.resolution)
    add_policy_adapters(policy.transformer, lora_config(32, 64, "gaussian", list(policy.lora_target_modules)))
    with torch.no_grad():   # a non-zero LoRA, so merging matters
        for name, p in policy.transformer.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 1e-3)
    compile_transformer(policy.transformer, args.scope if compiled else "eager")
    return policy


def _real_recipes(args) -> tuple[list[str], dict]:
    from solrl.precision.linear import get_recipe, select_kernel

    real, skipped = [], {}
    for name in args.recipes.split(","):
        kernel = select_kernel(get_recipe(name, args.device), args.device)
        (real.append(name) if kernel.real else skipped.__setitem__(name, {"skipped": kernel.note}))
    return real, skipped


def forward_speed(args, model_dir: Path) -> dict:
    """Per compile setting: the LoRA policy's forward ms, then each real recipe's and its ratio to it."""
    from solrl.models.lora import ROLLOUT, adapter
    from solrl.precision.engine import ExploreEngine

    real, skipped = _real_recipes(args)
    results = {}
    for mode in args.compile.split(","):
        compiled = mode == "compiled"
        policy = _policy(args, model_dir, compiled)
        prompts = [PROMPTS[i % len(PROMPTS)] for i in range(args.batch)]
        g = torch.Generator().manual_seed(0)
        x = torch.randn(args.batch, *policy.sample_shape, generator=g).to(args.device)
        t = torch.full((args.batch,), 0.7, device=args.device)
        cond = policy.encode_prompts(prompts)
        with torch.no_grad(), adapter(policy.transformer, ROLLOUT):
            first = _first_call(lambda: policy.velocity(x, t, cond), args.device)
            v_ref = policy.velocity(x, t, cond).float()
            ref_ms = _timed(lambda: policy.velocity(x, t, cond), args.device, args.reps) * 1000
        row = {"lora_policy": {"forward_ms": round(ref_ms, 2), "first_call_s": round(first, 1),
                               "kernel": f"peft LoRA unmerged, {policy.dtype}"}, **skipped}
        for name in real:
            start = time.perf_counter()
            engine = ExploreEngine(policy, name, compile=args.scope if compiled else "eager")
            build = time.perf_counter() - start
            with torch.no_grad():
                first = _first_call(lambda: engine.velocity(x, t, cond), args.device)
                err = float((engine.velocity(x, t, cond).float() - v_ref).norm() / v_ref.norm())
                ms = _timed(lambda: engine.velocity(x, t, cond), args.device, args.reps) * 1000
            sync = statistics.median(engine.sync(policy) for _ in range(3))
            row[name] = {"kernel": engine.kernel.name, "forward_ms": round(ms, 2), "vs_policy": round(ref_ms / ms, 3),
                         "first_call_s": round(first, 1), "build_s": round(build, 1), "sync_ms": round(sync * 1000, 1),
                         "velocity_rel_error": round(err, 5), "quantized_layers": len(engine.report.quantized),
                         "kept_layers": len(engine.report.skipped)}
            print(f"forward {mode} {name}: {row[name]}")
            del engine
            _empty_cache(args.device)
        results[mode] = row
        print(f"forward {mode} lora_policy: {row['lora_policy']}")
        del policy
        _empty_cache(args.device)
    eager, compiled = results.get("eager", {}), results.get("compiled", {})
    if "forward_ms" in eager.get("lora_policy", {}) and compiled:
        results["compiled_engine_vs_eager_policy"] = {
            name: round(eager["lora_policy"]["forward_ms"] / r["forward_ms"], 3)
            for name, r in compiled.items() if isinstance(r, dict) and "forward_ms" in r and name != "lora_policy"}
    return results


def rollout_speed(args, model_dir: Path) -> dict:
    """One prompt group at the paper's shape through run_rollout, per compile setting: generation seconds."""
    from solrl.precision.engine import ExploreEngine
    from solrl.rollout import RolloutSpec, run_rollout

    real, _ = _real_recipes(args)
    order = [r for r in ("nvfp4", "fp8", "int8", "bf16") if r in real]
    if not order:
        return {"skipped": "no explore recipe with a real kernel on this device"}
    recipe, reward = order[0], RandomCNNReward()
    n, k = args.explore_seeds, args.group_size
    seconds = {"naive_scaling_seconds": {}, "sol_rl_seconds": {}, "first_round_seconds": {}}
    for mode in args.compile.split(","):
        policy = _policy(args, model_dir, mode == "compiled")
        engine = ExploreEngine(policy, recipe, compile=args.scope if mode == "compiled" else "eager")
        specs = {family: RolloutSpec(family, k, n, 10, 6, "euler", 1.0, args.rollout_batch, "best_worst")
                 for family in ("naive_scaling", "sol_rl")}
        start = time.perf_counter()
        for spec in specs.values():  # first round: compilation, autotuning, allocator warm-up
            run_rollout(policy, reward, [PROMPTS[0]], list(range(n)), spec, engine)
        seconds["first_round_seconds"][mode] = round(time.perf_counter() - start, 1)
        for family, spec in specs.items():
            _sync(args.device)
            batch = run_rollout(policy, reward, [PROMPTS[0]], list(range(n)), spec, engine)
            seconds[f"{family}_seconds"][mode] = round(batch.seconds["rollout"], 2)
        print(f"rollout {mode}: naive_scaling {seconds['naive_scaling_seconds'][mode]} s, sol_rl {seconds['sol_rl_seconds'][mode]} s")
        del policy, engine
        _empty_cache(args.device)
    ns, sr = seconds["naive_scaling_seconds"], seconds["sol_rl_seconds"]
    ratios = {f"sol_rl_over_naive_scaling.{m}": round(ns[m] / sr[m], 3) for m in sr}
    if "eager" in ns and "compiled" in sr:
        ratios["compiled_sol_rl_over_eager_naive_scaling"] = round(ns["eager"] / sr["compiled"], 3)
    return {"explore_recipe": recipe, "N": n, "K": k, "full_steps": 10, "explore_steps": 6,
            "batch": args.rollout_batch, "resolution": args.resolution, **seconds, "ratios": ratios}


def _first_call(fn, device) -> float:
    _sync(device)
    start = time.perf_counter()
    fn()
    _sync(device)
    return time.perf_counter() - start


def _empty_cache(device):
    if torch.device(device).type == "cuda":
        torch.cuda.empty_cache()


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


SECTIONS = {"forward": forward_speed, "rollout": rollout_speed}


def run_arch(args, arch: str, deadline: float) -> dict:
    """Every section of one architecture, each skipped once the run's deadline has passed."""
    select_arch(args, arch)
    report = {"transformer_parameters": parameter_count(args.family, args.transformer), "skipped": {}}
    with tempfile.TemporaryDirectory(prefix="solrl_gpu_check_") as tmp:
        root = Path(tmp)
        model_dir = build_model_dir(args, root)
        for section in args.sections_of.get(arch, args.sections).split(","):
            if time.perf_counter() > deadline:
                report["skipped"][section] = f"the run's budget of {args.budget_seconds:.0f} s was spent"
                continue
            began = time.perf_counter()
            run = SECTIONS.get(section) or (lambda a, m: sol_rl_iterations(a, m, root))
            report[section] = run(args, model_dir)
            report.setdefault("section_seconds", {})[section] = round(time.perf_counter() - began, 1)
            _empty_cache(args.device)
    return report


def main(argv=None) -> dict:
    args = parse_args(argv)
    plan = {"archs": args.archs, "transformer_parameters": {a: parameter_count(*(
                ("sd3", TINY_TRANSFORMERS["sd3"]) if a == "tiny" else REAL_TRANSFORMERS[a])) for a in args.archs},
            "resolution": args.resolution, "batch": args.batch, "recipes": args.recipes.split(","),
            "compile": args.compile.split(","), "sections": args.sections.split(","), "arch_sections": args.sections_of,
            "rollout": {"N": args.explore_seeds, "K": args.group_size, "batch": args.rollout_batch},
            "sol_rl_iterations": args.iterations, "budget_seconds": args.budget_seconds, "out": args.out}
    print(json.dumps(plan, indent=2))
    if args.dry_run:
        return {"plan": plan}
    missing = missing_pieces(args.device)
    if missing:
        print("cannot run: this machine lacks " + "; ".join(missing) + ". Offline install: docs/gpu-acceptance.md")
        report = {"plan": plan, "missing": missing}
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
        return report
    report = {"plan": plan, "environment": environment(args.device)}
    start = time.perf_counter()
    for arch in args.archs:
        report[arch] = run_arch(args, arch, start + args.budget_seconds)
        if "rollout" in report[arch] and "rollout" not in report:
            report["rollout"] = report[arch]["rollout"]   # the acceptance figures, at the top
    report["seconds_total"] = round(time.perf_counter() - start, 1)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out} ({report['seconds_total']} s)")
    return report


if __name__ == "__main__":
    main()
