"""gpu_check's `speed` section and its Blackwell summary: on one policy and one explore engine per recipe
(each compiled once and used for both timings), the forward ms of the LoRA policy and of each recipe with a
real kernel, then one prompt group at the paper's shape (N 96 explored at 6 steps, K 24 regenerated at 10;
naive_scaling samples all 96 at 10) through solrl's own `run_rollout`.

Every low-precision recipe runs through torchao's configs (solrl/precision/torchao_kernels.py); the row
`fp8_torchao` is torchao's `quantize_` applied straight to a bf16 engine copy, without solrl's layer around
it, so the two fp8 rows side by side show what solrl's wrapper and sync cost.
"""
from __future__ import annotations

import statistics
import time
from pathlib import Path

import torch

from bench.gpu_presets import PROMPTS, RandomCNNReward

BLACKWELL_TARGET = 1.2   # the compiled NVFP4 engine against the compiled FP8 engine on sm100+
EXPLORE_PREFERENCE = ("nvfp4_1x16", "fp8", "int8", "bf16")   # the rollout timing's explore recipe: the first real one


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
    from solrl.precision.recipes import torchao_problem, torchao_version

    return torchao_problem(torchao_version())


def _engine(args, policy, name: str, compiled: bool, fp8_layers: list[str]):
    """The explore engine of recipe `name`; "fp8_torchao" is torchao's Float8 config (dynamic rowwise activation
    scales) applied by `quantize_` straight to a bf16 copy's layers that solrl's fp8 engine quantizes: the same
    kernel without solrl's layer (its casts and in-place sync) around it."""
    from solrl.models.compile import compile_transformer
    from solrl.precision.engine import ExploreEngine

    scope = args.scope if compiled else "eager"
    if name != "fp8_torchao":
        return ExploreEngine(policy, name, compile=scope, layers=args.explore_layers), None
    import torchao
    from torchao.quantization import Float8DynamicActivationFloat8WeightConfig, PerRow, quantize_

    engine = ExploreEngine(policy, "bf16")   # plain bf16 linear layers on the merged weights
    keep = set(fp8_layers)
    # torchao's own inductor settings would change every later measurement: left off, as solrl's engine does
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
    explore = next((r for r in EXPLORE_PREFERENCE if r in real), None)
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


def blackwell_summary(args, arch_report: dict) -> dict:
    """The NVFP4 engine against the FP8 engine, both compiled, where this GPU runs both for real; elsewhere it says so."""
    from solrl.precision.recipes import NVFP4_GEMM, device_info, select_kernel, get_recipe

    if torch.device(args.device).type != "cuda":
        return {"not_run": "NVFP4 GEMMs need a CUDA device with sm100+ (B200 / GB200, RTX 50xx); this run is on the CPU"}
    info = device_info(args.device)
    if not info.at_least(NVFP4_GEMM):
        return {"not_run": f"NVFP4 GEMMs need sm100+ (B200 / GB200, RTX 50xx); this GPU is {info.label}, so torchao's "
                           "NVFP4 / MX configs were not run here (their numerics and sync are tested on the CPU: "
                           "tests/test_torchao_kernels.py)"}
    compiled = arch_report.get("forward", {}).get("compiled", {})
    nvfp4, fp8 = compiled.get("nvfp4_1x16", {}), compiled.get("fp8", {})
    out = {"nvfp4_kernel": select_kernel(get_recipe("nvfp4_1x16"), info).name, "nvfp4": nvfp4, "fp8": fp8}
    if "forward_ms" in nvfp4 and "forward_ms" in fp8:
        ratio = fp8["forward_ms"] / nvfp4["forward_ms"]
        out.update(nvfp4_over_compiled_fp8=round(ratio, 3), target=BLACKWELL_TARGET, met=ratio >= BLACKWELL_TARGET)
    return out
