"""GPU acceptance run (issue 16): explore engines against the policy, eager and compiled; naive_scaling vs
sol_rl rollout seconds at the paper's shape; a few sol_rl iterations; one JSON.

    bash bench/gpu_check.sh                                  # one GPU, offline: SD3.5-M size, then SANA-1.6B size
    .venv/bin/python bench/gpu_check.py --arch sd35m --out gpu_check.json
    .venv/bin/python bench/gpu_check.py --dry-run            # CPU: size the architecture, print the plan
    .venv/bin/python bench/gpu_check.py --tiny --device cpu --out /tmp/g.json   # the whole path on a tiny model

The transformer is the released architecture (SD3.5-Medium or SANA-1.6B, built from its config,
random weights, nothing downloaded) behind tiny text encoders and a small VAE, so the figures are
the transformer's. Sections (a failing one is recorded and the next runs; the JSON is rewritten
after every step, so a run cut short keeps what it measured):
- speed, per compile setting (eager, then each transformer block compiled by inductor), on one policy
  and one engine per recipe, each compiled once and used for both timings:
  forward ms of the LoRA policy (peft, unmerged) and of each explore recipe with a real kernel (bf16,
  fp8, int8; nvfp4 only where a real kernel exists; torchao's float8 beside solrl's fp8 where torchao
  is installed), with the ratio to the policy at the same setting and first-call (compile) seconds;
  then, with the fastest real low-precision recipe, one prompt group at the paper's shape (N 96
  explored at 6 steps, K 24 regenerated at 10; naive_scaling samples all 96 at 10) through solrl's
  own run_rollout: `rollout.naive_scaling_seconds` and `rollout.sol_rl_seconds`. Steps starting after
  `--speed-budget-seconds` are skipped;
- sol_rl: `--iterations` iterations through solrl.training.trainer.Trainer with a random-weight CNN reward;
  skipped once `--budget-seconds` are spent;
- blackwell: the compiled nvfp4 engine against the compiled fp8 engine (target 1.2x), from the speed
  section, where the GPU is sm100+; elsewhere it says plainly that it was not run and why;
- presets (`--presets sd35l_pickscore,...`): each GPU preset as shipped, at its released size, sol_rl vs
  naive_scaling (compiled, as `auto` chooses) and naive_scaling eager: stage seconds, peak memory beside
  `solrl check`'s estimate, the kernel chosen (bench/gpu_presets.py).
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

from bench.gpu_presets import PROMPTS, VAE_LEVELS, RandomCNNReward, preset_runs, register_random_reward  # noqa: E402
from solrl.testing.random_pipelines import REAL_TRANSFORMERS, TINY_TRANSFORMERS  # noqa: E402

BLACKWELL_TARGET = 1.2   # issue 32: the compiled nvfp4 engine >= 1.2x the compiled fp8 engine on sm100


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--arch", default="sd35m", help=f"one or more of {', '.join(sorted(REAL_TRANSFORMERS))}, comma-separated")
    p.add_argument("--arch-sections", default="", help="per-arch sections, e.g. sana16b=sol_rl (default: --sections)")
    p.add_argument("--tiny", action="store_true", help="the tiny test transformer instead (CPU smoke run of this script)")
    p.add_argument("--device", default="cuda")
    p.add_argument("--resolution", type=int, default=1024)
    p.add_argument("--batch", type=int, default=24, help="images per forward in the forward timing (the rollout's)")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--recipes", default="bf16,fp8,int8,nvfp4,mxfp8")
    p.add_argument("--compile", default="eager,compiled", help="compile settings to time: eager, compiled or both")
    p.add_argument("--explore-layers", default="reference", choices=["reference", "all"],
                   help="which linears the engines quantize (rollout.explore_layers)")
    p.add_argument("--scope", default="blocks", choices=["blocks", "model"], help="what 'compiled' compiles (solrl/models/compile.py)")
    p.add_argument("--sections", default="speed,sol_rl", help="speed (forward and rollout timings), sol_rl (iterations); "
                                                              "none: only --presets")
    p.add_argument("--explore-seeds", type=int, default=96, help="N of the rollout section (the paper's 96)")
    p.add_argument("--group-size", type=int, default=24, help="K of the rollout section (the paper's 24)")
    p.add_argument("--rollout-batch", type=int, default=24, help="images per forward in the rollout section")
    p.add_argument("--iterations", type=int, default=2, help="sol_rl iterations through the trainer")
    p.add_argument("--budget-seconds", type=float, default=420, help="sections starting after this are skipped")
    p.add_argument("--speed-budget-seconds", type=float, default=330, help="speed steps starting after this are skipped")
    p.add_argument("--presets", default="", help="GPU presets to run as shipped (bench/gpu_presets.py), comma-separated, "
                                                 "e.g. sd35l_pickscore,flux1_pickscore; after the arch sections")
    p.add_argument("--preset-prompts", type=int, default=1, help="prompt groups per iteration in the presets section")
    p.add_argument("--preset-iterations", type=int, default=2)
    p.add_argument("--preset-runs", default="sol_rl,naive_scaling,naive_scaling_eager",
                   help="which runs per preset, in order: sol_rl, naive_scaling (each as `auto` chooses), "
                        "naive_scaling_eager (the paper's baseline; its rollout alone)")
    p.add_argument("--preset-model-dir", default="", help="keep each preset's random model here and reuse one "
                                                          "already there (a second call on a warm machine skips the build)")
    p.add_argument("--out", default="gpu_check.json")
    p.add_argument("--dry-run", action="store_true", help="no model run: size the architecture and print the plan")
    args = p.parse_args(argv)
    args.archs = ["tiny"] if args.tiny else args.arch.split(",")
    unknown = [a for a in args.archs if a != "tiny" and a not in REAL_TRANSFORMERS]
    if unknown:
        p.error(f"unknown --arch {unknown[0]!r}; choose from {', '.join(sorted(REAL_TRANSFORMERS))}")
    bad = set(args.preset_runs.split(",")) - {"sol_rl", "naive_scaling", "naive_scaling_eager"}
    if bad:
        p.error(f"unknown --preset-runs {sorted(bad)}; choose from sol_rl, naive_scaling, naive_scaling_eager")
    args.sections_of = dict(item.split("=", 1) for item in args.arch_sections.split() if "=" in item)
    select_arch(args, args.archs[0])
    if args.tiny:
        args.resolution = min(args.resolution, 32)
        args.explore_seeds, args.group_size, args.rollout_batch = min(args.explore_seeds, 8), min(args.group_size, 4), 4
        args.batch = min(args.batch, args.rollout_batch)
    return args


def select_arch(args, arch: str) -> None:
    args.family, args.transformer = ("sd3", TINY_TRANSFORMERS["sd3"]) if arch == "tiny" else REAL_TRANSFORMERS[arch]
    args.vae_levels = 2 if arch == "tiny" else VAE_LEVELS[args.family]


def missing_pieces(device: str) -> list[str]:
    """What this machine lacks for the run, said before anything is built."""
    import importlib.util

    missing = [f"python package {name}" for name in ("diffusers", "peft", "transformers", "safetensors", "scipy", "yaml", "rapidfuzz")
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
    from solrl.testing.random_pipelines import build_random_pipeline

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
    from solrl.models import load_policy
    from solrl.models.compile import compile_transformer
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
    from solrl.precision.recipes import get_recipe, select_kernel

    real, skipped = [], {}
    for name in args.recipes.split(","):
        kernel = select_kernel(get_recipe(name, args.device), args.device)
        (real.append(name) if kernel.real else skipped.__setitem__(name, {"skipped": kernel.note}))
    return real, skipped


def _torchao_missing() -> str | None:
    import importlib.util

    return None if importlib.util.find_spec("torchao") else "torchao is not installed (bench/gpu_wheels.txt)"


def _engine(args, policy, name: str, compiled: bool, fp8_layers: list[str]):
    """The explore engine of recipe `name`; "fp8_torchao" is torchao's float8 (dynamic rowwise
    activation scales) on the layers solrl's fp8 engine quantizes, for the library-vs-own comparison."""
    from solrl.models.compile import compile_transformer
    from solrl.precision.engine import ExploreEngine

    scope = args.scope if compiled else "eager"
    if name != "fp8_torchao":
        return ExploreEngine(policy, name, compile=scope, layers=args.explore_layers), None
    import torchao
    from torchao.quantization import Float8DynamicActivationFloat8WeightConfig, PerRow, quantize_

    engine = ExploreEngine(policy, "bf16")   # plain bf16 linear layers on the merged weights
    keep = set(fp8_layers)
    # torchao's own inductor settings would change every later measurement: left off, as for solrl's
    config = Float8DynamicActivationFloat8WeightConfig(granularity=PerRow(), set_inductor_config=False)
    quantize_(engine.model, config, filter_fn=lambda m, fqn: isinstance(m, torch.nn.Linear) and fqn in keep)
    compile_transformer(engine.model, scope)
    return engine, f"torchao {torchao.__version__} Float8DynamicActivationFloat8Weight PerRow"


def _time_engine(args, policy, name, compiled, inputs, v_ref, ref_ms, fp8_layers):
    start = time.perf_counter()
    engine, kernel = _engine(args, policy, name, compiled, fp8_layers)
    build = time.perf_counter() - start
    x, t, cond = inputs
    with torch.no_grad():
        first = _first_call(lambda: engine.velocity(x, t, cond), args.device)
        err = float((engine.velocity(x, t, cond).float() - v_ref).norm() / v_ref.norm())
        ms = _timed(lambda: engine.velocity(x, t, cond), args.device, args.reps) * 1000
    row = {"kernel": kernel or engine.kernel.name, "forward_ms": round(ms, 2), "vs_policy": round(ref_ms / ms, 3),
           "first_call_s": round(first, 1), "build_s": round(build, 1), "velocity_rel_error": round(err, 5),
           "quantized_layers": _subclassed_weights(engine.model) if kernel else len(engine.report.quantized)}
    if not kernel:
        row.update(sync_ms=round(statistics.median(engine.sync(policy) for _ in range(3)) * 1000, 1),
                   kept_layers=len(engine.report.skipped))
    return engine, row


def _subclassed_weights(model) -> int:
    """Linear layers whose weight torchao replaced by a quantized tensor subclass."""
    return sum(type(m.weight) not in (torch.Tensor, torch.nn.Parameter)
               for m in model.modules() if isinstance(m, torch.nn.Linear))


def _rollout_seconds(args, policy, engine) -> dict:
    """One prompt group at the paper's shape: naive_scaling's N at full steps vs sol_rl's N explored
    in `engine` at 6 steps and K regenerated at 10, after a warm-up round at one batch's size."""
    from solrl.rollout.driver import RolloutSpec, run_rollout

    reward, n, k, b = RandomCNNReward(), args.explore_seeds, args.group_size, args.rollout_batch
    spec = lambda family, seeds, group: RolloutSpec(family, group, seeds, 10, 6, "euler", 1.0, b, "best_worst")
    start = time.perf_counter()   # warm-up: every forward, decode and reward shape of the timed rounds
    run_rollout(policy, reward, [PROMPTS[0]], list(range(b)), spec("sol_rl", b, b), engine)
    out = {"warm_up_seconds": round(time.perf_counter() - start, 1)}
    for family in ("naive_scaling", "sol_rl"):
        _sync(args.device)
        out[family] = round(run_rollout(policy, reward, [PROMPTS[0]], list(range(n)), spec(family, n, k), engine)
                            .seconds["rollout"], 2)
    return out


def _error(exc: BaseException) -> dict:
    import traceback

    return {"error": f"{type(exc).__name__}: {exc}"[:500], "where": traceback.format_exc().splitlines()[-3][:300]}


def speed(args, model_dir: Path, deadline: float, save) -> dict:
    """Per compile setting, on one policy and one engine per recipe (compiled once, used for both):
    the forward ms of the LoRA policy and of each recipe, and the rollout seconds of naive_scaling and
    sol_rl with the fastest real low-precision recipe. Recipes starting after `deadline` are skipped;
    a failing recipe is recorded and the run goes on; `save(partial)` after each step."""
    from solrl.models.lora import OLD, adapter

    real, skipped = _real_recipes(args)
    explore = next((r for r in ("nvfp4", "fp8", "int8", "bf16") if r in real), None)
    order = ([explore] if explore else []) + [r for r in real if r != explore]
    if "fp8" in real:
        missing = _torchao_missing()
        (order.append("fp8_torchao") if missing is None else skipped.__setitem__("fp8_torchao", {"skipped": missing}))
    n, k = args.explore_seeds, args.group_size
    forward: dict = {}
    rollout = {"explore_recipe": explore, "N": n, "K": k, "full_steps": 10, "explore_steps": 6,
               "batch": args.rollout_batch, "resolution": args.resolution,
               "naive_scaling_seconds": {}, "sol_rl_seconds": {}, "warm_up_seconds": {}}
    result = {"forward": forward, "rollout": rollout}
    for mode in args.compile.split(","):
        if time.perf_counter() > deadline:
            forward[mode] = {"skipped": "the run's budget was spent"}
            continue
        compiled = mode == "compiled"
        policy = _policy(args, model_dir, compiled)
        prompts = [PROMPTS[i % len(PROMPTS)] for i in range(args.batch)]
        g = torch.Generator().manual_seed(0)
        x = torch.randn(args.batch, *policy.sample_shape, generator=g).to(args.device)
        t = torch.full((args.batch,), 0.7, device=args.device)
        inputs = (x, t, policy.encode_prompts(prompts))
        with torch.no_grad(), adapter(policy.transformer, OLD):
            first = _first_call(lambda: policy.velocity(*inputs), args.device)
            v_ref = policy.velocity(*inputs).float()
            ref_ms = _timed(lambda: policy.velocity(*inputs), args.device, args.reps) * 1000
        row = forward[mode] = {"lora_policy": {"forward_ms": round(ref_ms, 2), "first_call_s": round(first, 1),
                                               "kernel": f"peft LoRA unmerged, {policy.dtype}"}, **skipped}
        print(f"forward {mode} lora_policy: {row['lora_policy']}")
        fp8_layers: list[str] = []
        for name in order:
            if time.perf_counter() > deadline:
                row[name] = {"skipped": "the run's budget was spent"}
                continue
            engine = None
            try:
                engine, row[name] = _time_engine(args, policy, name, compiled, inputs, v_ref, ref_ms, fp8_layers)
                if name == "fp8":
                    fp8_layers = list(engine.report.quantized)
                print(f"forward {mode} {name}: {row[name]}")
                if name == explore:
                    seconds = _rollout_seconds(args, policy, engine)
                    rollout["warm_up_seconds"][mode] = seconds["warm_up_seconds"]
                    for family in ("naive_scaling", "sol_rl"):
                        rollout[f"{family}_seconds"][mode] = seconds[family]
                    print(f"rollout {mode}: {seconds}")
            except Exception as exc:  # one recipe's failure must not lose the rest of a paid-for GPU run
                row[name] = _error(exc)
                print(f"forward {mode} {name} failed: {row[name]}")
            del engine
            _empty_cache(args.device)
            save(result)
        del policy
        _empty_cache(args.device)
    eager, compiled_row = forward.get("eager", {}), forward.get("compiled", {})
    if "forward_ms" in eager.get("lora_policy", {}) and compiled_row:
        forward["compiled_engine_vs_eager_policy"] = {
            name: round(eager["lora_policy"]["forward_ms"] / r["forward_ms"], 3)
            for name, r in compiled_row.items() if isinstance(r, dict) and "forward_ms" in r and name != "lora_policy"}
    if "forward_ms" in compiled_row.get("bf16", {}):
        forward["compiled_engine_vs_compiled_bf16_engine"] = {
            name: round(compiled_row["bf16"]["forward_ms"] / r["forward_ms"], 3)
            for name, r in compiled_row.items() if isinstance(r, dict) and "forward_ms" in r and name != "lora_policy"}
    ns, sr = rollout["naive_scaling_seconds"], rollout["sol_rl_seconds"]
    rollout["ratios"] = {f"sol_rl_over_naive_scaling.{m}": round(ns[m] / sr[m], 3) for m in sr if m in ns}
    if "eager" in ns and "compiled" in sr:
        rollout["ratios"]["compiled_sol_rl_over_eager_naive_scaling"] = round(ns["eager"] / sr["compiled"], 3)
    return result


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
    from solrl.training.trainer import Trainer

    register_random_reward()
    prompt_file = root / "prompts.txt"
    prompt_file.write_text("\n".join(PROMPTS) + "\n")
    cuda = torch.device(args.device).type == "cuda"
    recipe = "auto" if cuda else "int8"   # the CPU smoke run keeps a quantizing recipe (auto there is bf16 or fp32)
    cfg = load_config(None, [
        f"model.name={args.family}", f"model.path={model_dir}", f"model.device={args.device}",
        f"model.dtype={'bfloat16' if cuda else 'float32'}", f"model.resolution={args.resolution}",
        f"model.gradient_checkpointing={str(cuda).lower()}", f"out_dir={root / 'run'}", "reward.name=gpu_check_random_cnn",
        f"sampling.batch_size={min(args.batch, 8)}", "sampling.steps=10", f"train.autocast_bf16={str(cuda).lower()}",
        f"lora.target_modules=[{','.join(_family_class(args.family).lora_target_modules)}]",
        "train.prompts_per_iter=2", "train.group_size=4", "train.micro_batch=4", "train.timestep_fraction=0.2",
        f"train.prompts={prompt_file}", f"eval.split={prompt_file}", "rollout.family=sol_rl",
        f"rollout.explore_seeds={16 if not args.tiny else 8}", "rollout.explore_steps=6",
        f"rollout.explore_precision={recipe}",
    ])
    trainer = Trainer(cfg, quiet=True)
    records = []
    for it in range(args.iterations):
        record = trainer.run_iteration(it)
        keep = ("reward_mean", "loss", "grad_norm", "proxy_full_spearman", "seconds_explore", "seconds_regenerate",
                "seconds_train", "seconds_sync", "seconds_iteration", "images_per_second")
        row = {"iteration": it + 1, "explore_engine": trainer.engine.label,
               **({k: record.get(k) for k in keep} if record else {"skipped": True})}
        print(f"sol_rl iteration {it + 1}: {row}")
        records.append(row)
    return records


def _family_class(family):
    from solrl.models.diffusers_families import MODEL_FAMILIES

    return MODEL_FAMILIES[family]


def blackwell_summary(args, arch_report: dict) -> dict:
    """The NVFP4 engine against the FP8 engine, both compiled, where this GPU runs both for real; elsewhere it says so."""
    from solrl.precision.recipes import NVFP4_GEMM, device_info, select_kernel, get_recipe

    if torch.device(args.device).type != "cuda":
        return {"not_run": "NVFP4 GEMMs need a CUDA device with sm100+ (B200 / GB200, RTX 50xx); this run is on the CPU"}
    info = device_info(args.device)
    if not info.at_least(NVFP4_GEMM):
        return {"not_run": f"NVFP4 GEMMs need sm100+ (B200 / GB200, RTX 50xx); this GPU is {info.label}, so the torchao "
                           "NVFP4 / MXFP8 engines were not run here (their wiring is tested on the CPU: tests/test_torchao_kernels.py)"}
    compiled = arch_report.get("forward", {}).get("compiled", {})
    nvfp4, fp8 = compiled.get("nvfp4", {}), compiled.get("fp8", {})
    out = {"nvfp4_kernel": select_kernel(get_recipe("nvfp4"), info).name, "nvfp4": nvfp4, "fp8": fp8}
    if "forward_ms" in nvfp4 and "forward_ms" in fp8:
        ratio = fp8["forward_ms"] / nvfp4["forward_ms"]
        out.update(nvfp4_over_compiled_fp8=round(ratio, 3), target=BLACKWELL_TARGET, met=ratio >= BLACKWELL_TARGET)
    return out


def run_arch(args, arch: str, report: dict, start: float, save) -> dict:
    """Every section of one architecture: speed until its own deadline, the rest until the run's;
    a section that fails is recorded and the next one runs."""
    select_arch(args, arch)
    mine = report[arch] = {"transformer_parameters": parameter_count(args.family, args.transformer), "skipped": {}}
    with tempfile.TemporaryDirectory(prefix="solrl_gpu_check_") as tmp:
        root = Path(tmp)
        model_dir = build_model_dir(args, root)
        for section in args.sections_of.get(arch, args.sections).split(","):
            if time.perf_counter() > start + args.budget_seconds:
                mine["skipped"][section] = f"the run's budget of {args.budget_seconds:.0f} s was spent"
                continue
            began = time.perf_counter()
            try:
                if section == "speed":
                    def partial(result):
                        mine.update(result)
                        save()
                    mine.update(speed(args, model_dir, start + args.speed_budget_seconds, partial))
                    report.setdefault("rollout", mine["rollout"])   # the acceptance figures, at the top
                else:
                    mine[section] = sol_rl_iterations(args, model_dir, root)
            except Exception as exc:  # record and go on: the next section may still run
                mine[section] = _error(exc)
                print(f"{arch} {section} failed: {mine[section]}")
            mine.setdefault("section_seconds", {})[section] = round(time.perf_counter() - began, 1)
            _empty_cache(args.device)
            save()
    return mine


def main(argv=None) -> dict:
    args = parse_args(argv)
    plan = {"archs": args.archs, "transformer_parameters": {a: parameter_count(*(
                ("sd3", TINY_TRANSFORMERS["sd3"]) if a == "tiny" else REAL_TRANSFORMERS[a])) for a in args.archs},
            "resolution": args.resolution, "batch": args.batch, "recipes": args.recipes.split(","),
            "compile": args.compile.split(","), "scope": args.scope, "explore_layers": args.explore_layers, "sections": args.sections.split(","),
            "arch_sections": args.sections_of, "rollout": {"N": args.explore_seeds, "K": args.group_size,
                                                           "batch": args.rollout_batch},
            "sol_rl_iterations": args.iterations, "budget_seconds": args.budget_seconds,
            "speed_budget_seconds": args.speed_budget_seconds, "out": args.out,
            "presets": [p for p in args.presets.split(",") if p], "preset_prompts": args.preset_prompts,
            "preset_iterations": args.preset_iterations, "preset_runs": args.preset_runs.split(",")}
    print(json.dumps(plan, indent=2))
    if args.dry_run:
        return {"plan": plan}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    missing = missing_pieces(args.device)
    if missing:
        print("cannot run: this machine lacks " + "; ".join(missing) + ". Offline install: docs/gpu-acceptance.md")
        report = {"plan": plan, "missing": missing}
        out.write_text(json.dumps(report, indent=2) + "\n")
        return report
    report = {"plan": plan, "environment": environment(args.device), "complete": False}
    save = lambda: out.write_text(json.dumps(report, indent=2) + "\n")   # after every step: a timeout keeps the rest
    start = time.perf_counter()
    for arch in args.archs:
        if args.sections_of.get(arch, args.sections) in ("", "none"):
            continue
        run_arch(args, arch, report, start, save)
        report["blackwell"] = blackwell_summary(args, report[arch])
        save()
    if args.presets:
        def partial(result):
            report["presets"] = result
            save()
        partial(preset_runs(args, start + args.budget_seconds, partial))
    report.update(seconds_total=round(time.perf_counter() - start, 1), complete=True)
    save()
    print(f"wrote {out} ({report['seconds_total']} s)")
    return report


if __name__ == "__main__":
    main()
