"""The `solrl` command."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _common_model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="toy", help="model family (default: toy)")
    p.add_argument("--model-path", default=None, help="checkpoint directory; default: the shipped toy base model")
    p.add_argument("--shift", type=float, default=None, help="timestep shift; default: the model's own")


def _sampling_args(p: argparse.ArgumentParser, steps: int = 10) -> None:
    p.add_argument("--steps", type=int, default=steps, help=f"ODE steps (default {steps})")
    p.add_argument("--solver", default="euler", choices=["euler", "dpm2"], help="deterministic ODE solver")
    p.add_argument("--guidance", type=float, default=1.0, help="CFG scale; 1.0 = CFG-free (default)")
    p.add_argument("--batch-size", type=int, default=64, help="images per forward pass")


def cmd_sample(args) -> int:
    from PIL import Image

    from .images import image_grid
    from .models import load_policy
    from .rollout.generation import generate

    policy = load_policy(args.model, args.model_path, args.shift)
    prompts = [p for p in args.prompt for _ in args.seeds]
    seeds = [s for _ in args.prompt for s in args.seeds]
    samples = generate(policy, prompts, seeds, args.steps, args.solver, args.guidance, batch_size=args.batch_size)
    grid = image_grid(policy.decode(samples), columns=len(args.seeds), upscale=args.upscale)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(grid).save(args.out)
    print(f"wrote {args.out}: {len(args.prompt)} prompt(s) as rows x {len(args.seeds)} seed(s) as columns")
    return 0


def _prompts_policy_reward(args):
    """The prompt set, policy and reward named by --prompts/--max-prompts, --model*, --reward; the policy's
    weights ("live" / "ema") go into args.weights_used for a run, None otherwise."""
    from .data import load_prompts
    from .models import load_policy
    from .rewards import build_reward

    prompts = load_prompts(args.prompts)
    if args.max_prompts:
        prompts = prompts[: args.max_prompts]
    args.weights_used = None
    if getattr(args, "run", None):  # a training run's trained LoRA on the base it was trained from
        from .models import evaluated_weights, load_trained_policy
        from .training.checkpoint import load_checkpoint

        ckpt = load_checkpoint(args.run)
        args.reward = args.reward or ckpt["config"]["reward"]["name"]   # score as the run scored itself
        # by default the weights the trainer evaluated: its EMA of the LoRA under eval.ema, else the LoRA itself
        args.weights_used = evaluated_weights(ckpt) if getattr(args, "weights", "auto") == "auto" else args.weights
        policy = load_trained_policy(ckpt, args.weights_used)[0]
    else:
        policy = load_policy(args.model, args.model_path, args.shift)
    args.reward = args.reward or "geneval_gold"   # the toy presets' reward
    return prompts, policy, build_reward(args.reward)


def cmd_eval(args) -> int:
    from .training.evaluate import evaluate

    prompts, policy, reward = _prompts_policy_reward(args)
    summary = evaluate(policy, reward, prompts, args.seeds_per_prompt, args.steps, args.solver, args.guidance,
                       args.batch_size, out_dir=args.out, tag=args.tag)
    summary.update({"model": args.model, "model_path": args.model_path or "shipped toy base", "reward": args.reward,
                    "prompts": args.prompts, **({"run": str(args.run), "weights": args.weights_used} if args.run else {})})
    print(json.dumps(summary, indent=2))
    if args.out:
        (Path(args.out) / f"{args.tag}.json").write_text(json.dumps(summary, indent=2) + "\n")
    return 0


def cmd_pretrain_toy(args) -> int:
    from .toyworld.pretrain import PretrainConfig, pretrain_toy

    cfg = PretrainConfig(out=args.out, steps=args.steps, batch_size=args.batch_size, lr=args.lr, seed=args.seed, init=args.init,
                         autoencoder=args.autoencoder, timestep_sampling=args.timestep_sampling,
                         text_position_scale=args.text_positions, text_causal=args.text_causal,
                         text_word_scale=args.text_words, mean_weight=args.mean_weight, mean_renders=args.mean_renders,
                         relations=tuple(args.relations))
    out = pretrain_toy(cfg)
    print(f"wrote the toy base model to {out}")
    return 0


def cmd_widen_toy(args) -> int:
    import shutil

    from diffusers import SD3Transformer2DModel

    from .models.toy import TOY_BASE_DIR
    from .models.toy_autoencoder import AUTOENCODER_DIR
    from .models.widen import widen_sd3_transformer

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


def cmd_toy_split(args) -> int:
    from .models import load_policy
    from .precision.recipes import cpu_label
    from .rewards import build_reward
    from .toyworld.hard_split import make_hard_splits

    if args.seeds < 1 or not 0 <= args.max_strict <= 1:
        raise ValueError(f"--seeds must be >= 1 and --max-strict in [0, 1]; got {args.seeds} and {args.max_strict}")
    # the effective settings, written out, so the header repeats the measurement whatever the defaults become
    command = (f"solrl toy-split {args.which} --seeds {args.seeds} --max-strict {args.max_strict} --reward {args.reward} "
               f"--steps {args.steps} --solver {args.solver} --guidance {args.guidance}"
               + (f" --max-prompts {args.max_prompts}" if args.max_prompts else "")
               + (f" --model-path {args.model_path}" if args.model_path else "")
               + (f" --shift {args.shift}" if args.shift is not None else ""))
    how = {"command": command, "reward": args.reward, "cpu": cpu_label(), "model": args.model_path or "the shipped toy base"}
    written = make_hard_splits(load_policy(args.model, args.model_path, args.shift), build_reward(args.reward), args.out,
                               args.seeds, args.max_strict, how, args.steps, args.solver, args.guidance, args.batch_size,
                               args.max_prompts, progress=lambda name, done, total: print(f"  {name}: {done}/{total} prompts", flush=True))
    for path in written.values():
        print(f"wrote {path}: {sum(1 for line in path.read_text().splitlines() if not line.startswith('#'))} prompts")
    print("to ship them as named splits (train.prompts=hard_train, eval.split=hard_heldout), copy them to solrl/assets/toy_splits/")
    return 0


def cmd_pretrain_toy_autoencoder(args) -> int:
    from .toyworld.pretrain_autoencoder import AutoencoderConfig, pretrain_autoencoder

    out = pretrain_autoencoder(AutoencoderConfig(out=args.out, steps=args.steps, seed=args.seed))
    print(f"wrote the toy autoencoder to {out}; pretrain on its latents with `solrl pretrain-toy --autoencoder {out}`")
    return 0


def cmd_pretrain_toy_referee(args) -> int:
    from .toyworld.pretrain_referee import RefereeConfig, pretrain_referee

    out = pretrain_referee(RefereeConfig(out=args.out, steps=args.steps, seed=args.seed), args.autoencoder)
    print(f"wrote the referee to {out}; the toy rewards report the one in solrl/assets/toy_referee, so copy "
          f"{out}/* there to ship it")
    return 0


def cmd_train(args) -> int:
    import logging

    from .config import load_config
    from .parallel.distributed import init_world, launched_by_torchrun
    from .training.trainer import Trainer

    if args.nproc_per_node > 1 and not launched_by_torchrun():
        return _relaunch_with_torchrun(args)
    world = init_world()  # under torchrun: join the process group; alone: rank 0 of 1
    level = logging.INFO if world.main else logging.WARNING  # one voice in the log
    logging.basicConfig(level=level, format=f"%(asctime)s {'' if not world.active else f'[rank {world.rank}] '}%(name)s %(levelname)s %(message)s")
    try:
        cfg = load_config(args.config, args.overrides)
        resume = args.resume
        if resume == "auto":
            from .training.checkpoint import holds_checkpoints

            resume = cfg.out_dir if holds_checkpoints(Path(cfg.out_dir) / "checkpoints") else None
        summary = Trainer(cfg, resume=resume, quiet=args.quiet).train()
    finally:
        world.shutdown()
    if world.main:
        print(json.dumps({k: v for k, v in summary.items() if k != "last_train_record"}, indent=2))
        print(f"run directory: {cfg.out_dir} (curve.png, train.jsonl, eval.jsonl, checkpoints/, tb/); "
              f"see it with: solrl report {cfg.out_dir}")
    return 0


def cmd_check(args) -> int:
    from .config import load_config
    from .preflight import run_check
    from .precision.recipes import DeviceInfo

    cfg = load_config(args.config, args.overrides)
    described = None
    if args.capability:
        major, _, minor = args.capability.partition(".")
        if not (major.isdigit() and minor.isdigit()):
            raise ValueError(f"--capability {args.capability!r} must look like 9.0 (H100 / H200) or 10.0 (B200)")
        described = DeviceInfo("cuda", args.gpu_name, (int(major), int(minor)), memory_gib=args.gpu_memory_gib)
    report = run_check(cfg, described)
    print(f"solrl check {args.config or '(defaults)'} {' '.join(args.overrides)}".rstrip())
    print(report.render())
    return 2 if report.problems else 0


def _relaunch_with_torchrun(args) -> int:
    """`solrl train --nproc-per-node P ...` = `torchrun --standalone --nproc-per-node P -m solrl train ...` (one node)."""
    import subprocess

    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={args.nproc_per_node}",
           "-m", "solrl", "train", args.config, *args.overrides]
    if args.resume:
        cmd += ["--resume", args.resume]
    if args.quiet:
        cmd.append("--quiet")
    return subprocess.run(cmd).returncode


def cmd_export(args) -> int:
    from .models import load_base_policy, load_trained_policy
    from .models.lora_export import check_export, export_lora
    from .training.checkpoint import load_checkpoint

    ckpt = load_checkpoint(args.run)
    policy, lcfg = load_trained_policy(ckpt)
    base = ckpt["config"]["model"].get("path") or getattr(policy, "default_hub_id", "the shipped toy base (solrl/assets/toy_base)")
    out = export_lora(policy, lcfg, args.out, base_model=base)
    print(f"exported the trained LoRA of {ckpt['_path']} to {out}: peft (adapter_config.json, adapter_model.safetensors) "
          f"and diffusers (pytorch_lora_weights.safetensors); scale alpha/r = {lcfg.lora_alpha / lcfg.r:g} folded into lora_B")
    if not args.check:
        return 0
    result = check_export(out, policy, lambda: load_base_policy(ckpt))
    print(f"check: relative velocity difference to the trained policy (tolerance {result.tolerance:g})")
    print("\n".join(result.lines()))
    if not result.ok:
        print(f"error: a loader does not reproduce the trained policy from {out}; do not ship these files", file=sys.stderr)
    return 0 if result.ok else 1


def cmd_data_fetch(args) -> int:
    from .data.fetch import FetchError, FetchOptions, fetch_set
    from .data.sets import known_set

    for name in args.names:  # every name checked before any download starts
        known_set(name)
    options = FetchOptions(retries=args.retries, progress=not args.quiet, force=args.force, offline=args.offline)
    failed = []
    for name in args.names:
        try:
            print("\n".join(fetch_set(name, args.out, options)))
        except FetchError as exc:
            print("\n".join(exc.done))
            failed.append(str(exc))
    if failed:
        raise FetchError("\n".join(failed))
    return 0


def cmd_data_list(args) -> int:
    from .data.listing import list_sets

    print(list_sets(args.out))
    return 0


def cmd_probe(args) -> int:
    from .rollout.probe import run_probe

    prompts, policy, reward = _prompts_policy_reward(args)
    cases = [(recipe, steps, layers) for recipe in args.precision for steps in args.explore_steps for layers in args.explore_layers]
    rows = run_probe(policy, reward, prompts, args.seeds, cases, args.full_steps, args.solver, args.batch_size, args.select_k)
    print(json.dumps(rows, indent=2))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(rows, indent=2) + "\n")
    return 0


def cmd_bench(args) -> int:
    import logging

    from .bench import DEFAULT_FAMILIES, FAMILY_PRESETS, parse_variant, run_convergence, write_convergence_report

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    variants = dict(parse_variant(tokens) for tokens in args.variant or [])
    families = args.families or DEFAULT_FAMILIES
    unknown = [f for f in families if f not in FAMILY_PRESETS and f not in variants]
    if unknown:
        raise ValueError(f"unknown family {unknown[0]!r}; choose from {', '.join([*FAMILY_PRESETS, *variants])} "
                         "(--variant NAME FAMILY OVERRIDE... names one of your own)")
    from .redaction import redact_override

    command = ("solrl bench convergence " + " ".join(map(redact_override, sys.argv[3:]))).strip()
    if variants and args.algorithms:
        raise ValueError("--variant works with the families' table, not with --algorithms; run them apart")
    if args.algorithms:  # objectives x families: one run per pair, one table
        from . import bench

        algorithms = [a for item in args.algorithms for a in item.split(",") if a]
        unknown = [a for a in algorithms if a not in bench.ALGORITHM_OVERRIDES]
        if unknown:
            raise ValueError(f"unknown algorithm {unknown[0]!r}; choose from {', '.join(bench.ALGORITHM_OVERRIDES)}")
        families = args.families or ["diffusionnft", "sol_rl"]
        results = bench.run_objective_convergence(args.minutes, args.out, algorithms, families, args.overrides,
                                                  args.skip_existing)
        print(bench.write_objective_report(results, args.out, command, args.target).read_text())
        return 0
    if args.seeds < 1:
        raise ValueError(f"--seeds must be >= 1, got {args.seeds}")
    results = run_convergence(args.minutes, args.out, families, args.overrides, args.skip_existing, args.seeds, variants)
    print(write_convergence_report(results, args.out, command, args.target).read_text())
    return 0


def cmd_report(args) -> int:
    from .reporting.report import write_report

    page = write_report(args.run, args.out)
    print(f"wrote {page} (self-contained; PNGs beside it)")
    if args.screenshot:
        from .reporting.screenshot import screenshot

        print(f"wrote {screenshot(page, args.screenshot)}")
    return 0


def cmd_convert_checkpoint(args) -> int:
    from .training.checkpoint import convert_pickled

    written = convert_pickled(args.old, trust=args.trust)
    print("\n".join(f"wrote {p} (sealed)" for p in written))
    print(f"converted {len(written)} pickled checkpoint(s); the .pt files were left as they were: delete them once "
          "you have resumed or exported from the .safetensors ones")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="solrl", description="RL post-training of text-to-image flow models (Sol-RL, DiffusionNFT).")
    sub = parser.add_subparsers(dest="command", required=True)
    from .toyworld.grammar import RELATIONS  # light: the grammar alone

    p = sub.add_parser("sample", help="sample a PNG grid: prompts as rows, seeds as columns")
    p.add_argument("prompt", nargs="+", help="one or more prompts")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3], help="initial-noise seeds (default 0 1 2 3)")
    p.add_argument("--out", default="runs/sample.png", help="output PNG")
    p.add_argument("--upscale", type=int, default=4, help="nearest-neighbour upscale of the grid (default 4)")
    _common_model_args(p)
    _sampling_args(p)
    p.set_defaults(fn=cmd_sample)

    p = sub.add_parser("eval", help="score a model on a prompt set with fixed seeds; JSON summary + PNG grid")
    p.add_argument("--prompts", default="heldout", help="toy split (train | heldout) or a .txt/.jsonl/.parquet file")
    p.add_argument("--reward", default=None, help="reward name (see solrl.rewards.REWARDS); default: the run's own with "
                                                  "--run, else geneval_gold (the toy presets')")
    p.add_argument("--seeds-per-prompt", type=int, default=2, help="fixed seeds per prompt (default 2)")
    p.add_argument("--max-prompts", type=int, default=0, help="use only the first N prompts (0 = all)")
    p.add_argument("--out", default="runs/eval", help="directory for <tag>.json and <tag>_grid.png")
    p.add_argument("--tag", default="eval", help="file-name stem of the outputs")
    p.add_argument("--run", default=None, help="a training run's directory or checkpoint file: evaluate its trained LoRA "
                   "(the newest checkpoint), on the base model it was trained from; --model and --model-path are ignored")
    p.add_argument("--weights", default="auto", choices=["auto", "live", "ema"],
                   help="with --run: the trained LoRA (live) or its evaluation EMA; auto (default) = what the trainer "
                        "evaluated (the EMA under eval.ema)")
    _common_model_args(p)
    _sampling_args(p)
    p.set_defaults(fn=cmd_eval)

    p = sub.add_parser("train", help="DiffusionNFT / Sol-RL training from a YAML preset plus key=value overrides")
    p.add_argument("config", help="YAML preset, e.g. configs/toy_nft.yaml")
    p.add_argument("overrides", nargs="*", help="dotted overrides, e.g. train.lr=1e-4 train.iterations=20")
    p.add_argument("--resume", default=None, help="checkpoint file or run directory to continue; 'auto' = out_dir if it has one")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--nproc-per-node", type=int, default=1,
                   help="processes on this machine (launches torchrun --standalone; for several nodes call torchrun yourself)")
    p.set_defaults(fn=cmd_train)

    p = sub.add_parser("check", help="preflight: what a preset would run on this device, what it lacks, its peak memory; "
                                     "loads no weights (exit 2 when something would stop the run)")
    p.add_argument("config", nargs="?", default=None, help="YAML preset (default: built-in defaults)")
    p.add_argument("overrides", nargs="*", help="key=value overrides, as for train")
    p.add_argument("--capability", default=None, help="describe a GPU instead of this machine's device: compute capability, "
                                                      "e.g. 9.0 (H100 / H200), 10.0 (B200), 8.0 (A100)")
    p.add_argument("--gpu-memory-gib", type=float, default=80.0, help="that GPU's memory (default 80)")
    p.add_argument("--gpu-name", default="described GPU", help="that GPU's name, for the printout")
    p.set_defaults(fn=cmd_check)

    p = sub.add_parser("export", help="write a run's trained LoRA in peft and diffusers formats")
    p.add_argument("run", help="run directory or checkpoint file")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--check", action="store_true",
                   help="load the files back through peft and diffusers, print each route's difference; exit 1 if one fails")
    p.set_defaults(fn=cmd_export)

    p = sub.add_parser("data", help="the papers' prompt sets: `data fetch NAME...` downloads and verifies, `data list` shows them")
    data = p.add_subparsers(dest="data_command", required=True)
    q = data.add_parser("fetch", help="download known prompt sets (pinned SHA-256 / git blob id and prompt count)")
    q.add_argument("names", nargs="+", metavar="NAME", help="pickscore, ocr, geneval, drawbench (see `solrl data list`)")
    q.add_argument("--out", default="data", help="folder for <NAME>/<file> and <NAME>/SOURCE.json (default data, as the presets read)")
    q.add_argument("--offline", action="store_true", help="download nothing: check files placed by hand, say where the missing go")
    q.add_argument("--force", action="store_true", help="replace a present file that is not the pinned one")
    q.add_argument("--retries", type=int, default=3, help="further tries of a source after a cut download (default 3)")
    q.add_argument("--quiet", action="store_true", help="no progress bar")
    q.set_defaults(fn=cmd_data_fetch)
    q = data.add_parser("list", help="the known prompt sets: present and verified or not, and the presets that use them")
    q.add_argument("--out", default="data", help="where `data fetch` put them (default data)")
    q.set_defaults(fn=cmd_data_list)

    p = sub.add_parser("probe", help="proxy fidelity: explore engine vs full precision ranking of seeds")
    p.add_argument("--prompts", default="heldout", help="toy split or prompt file")
    p.add_argument("--max-prompts", type=int, default=16, help="first N prompts (0 = all; default 16)")
    p.add_argument("--seeds", type=int, default=32, help="seeds per prompt, N (default 32)")
    p.add_argument("--precision", nargs="+", default=["bf16"], help="explore recipes, e.g. fp32 bf16 int8 fp8 nvfp4")
    p.add_argument("--explore-steps", type=int, nargs="+", default=[6], help="explore step budgets (default 6)")
    p.add_argument("--explore-layers", nargs="+", default=["reference"], choices=["reference", "all"],
                   help="which linears the engine quantizes: the Sol-RL reference's choice per family, or every one (both: compare)")
    p.add_argument("--full-steps", type=int, default=10, help="full-precision steps (default 10)")
    p.add_argument("--select-k", type=int, default=0, help="K for the top/bottom selection match (default N/2, even: the top and bottom N/4)")
    p.add_argument("--reward", default="geneval_gold", help="reward that scores both stages (default: the toy presets')")
    p.add_argument("--solver", default="euler", choices=["euler", "dpm2"])
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--out", default=None, help="write the rows as JSON here")
    _common_model_args(p)
    p.set_defaults(fn=cmd_probe)

    p = sub.add_parser("bench", help="benchmarks: `bench convergence` runs the four Sol-RL families side by side")
    p.add_argument("which", choices=["convergence"], help="which benchmark")
    p.add_argument("overrides", nargs="*", help="dotted overrides applied to every family, e.g. rollout.explore_seeds=96")
    p.add_argument("--minutes", type=float, default=10.0, help="training-time budget per run in minutes, evaluations left out (default 10)")
    p.add_argument("--families", nargs="+", default=None, help="families to run (default: diffusionnft naive_scaling naive_quant sol_rl; "
                   "also sol_rl_adaptive: sol_rl with rollout.adaptive=true)")
    p.add_argument("--variant", nargs="+", action="append", metavar="NAME FAMILY OVERRIDE",
                   help="a family of your own to list in --families: NAME, the shipped family it varies, and its overrides, "
                        "e.g. --variant sol_rl_n96 sol_rl rollout.explore_seeds=96 (repeatable; it takes every word up to the "
                        "next option, so put the overrides for every family before it)")
    p.add_argument("--out", default="runs/convergence", help="directory for the runs, convergence.png/.md/.json")
    p.add_argument("--skip-existing", action="store_true", help="reuse finished runs found in --out")
    p.add_argument("--seeds", type=int, default=3,
                   help="runs per family (seed=0..N-1); means with 95%% intervals when N > 1 (default 3)")
    p.add_argument("--algorithms", nargs="+", default=None,
                   help="objectives to compare, e.g. nft,flow_grpo,awm (each run on every --families, default "
                        "diffusionnft and sol_rl: without and with two-stage exploration)")
    p.add_argument("--target", type=float, default=None,
                   help="the held-out value to reach in the time-to-target columns, in their metric (strict accuracy, "
                        "else gold accuracy, else the reward; default: diffusionnft's final mean; with --algorithms, the held-out reward of nft on "
                        "diffusionnft's final); with it, families without diffusionnft are timed against the first")
    p.set_defaults(fn=cmd_bench)

    p = sub.add_parser("report", help="HTML page + PNGs of a run: rewards, losses, timings, proxy fidelity, sample grids, config")
    p.add_argument("run", help="a training run's out_dir")
    p.add_argument("--out", default=None, help="output directory (default RUN/report)")
    p.add_argument("--screenshot", default=None, help="also render the page to this PNG with headless Chromium")
    p.set_defaults(fn=cmd_report)

    p = sub.add_parser("convert-checkpoint", help="one-off: rewrite pickled checkpoints (.pt, earlier solrl) as safetensors ones")
    p.add_argument("old", help="a .pt checkpoint, or a run / checkpoints directory: every .pt without a .safetensors twin")
    p.add_argument("--trust", action="store_true", help="required: you trust the source of the pickles (they are read "
                   "with torch's weights-only unpickler, but a pickle is code)")
    p.set_defaults(fn=cmd_convert_checkpoint)

    p = sub.add_parser("pretrain-toy", help="pretrain the toy base model by rectified flow on rendered scenes")
    p.add_argument("--out", default="runs/pretrain_toy", help="output directory (safetensors + training.json)")
    p.add_argument("--steps", type=int, default=2000, help="optimizer steps (default 2000, 15-18 min on 2 cores)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--init", default=None, help="continue from this model directory (e.g. solrl/assets/toy_base) "
                   "instead of random weights")
    p.add_argument("--autoencoder", default=None, help="pretrain on the latents of this toy autoencoder "
                   "(solrl pretrain-toy-autoencoder); it is saved beside the model")
    p.add_argument("--timestep-sampling", choices=["logit_normal", "uniform"], default="logit_normal",
                   help="training times: SD3's logit-normal, or uniform (covers the high noise where layouts form)")
    p.add_argument("--text-positions", type=float, default=None, metavar="SCALE",
                   help="add SCALE x a sinusoidal position code to the text token states, so word order reaches the "
                   "transformer (default: the --init model's, else 0); saved with the model")
    p.add_argument("--text-causal", action=argparse.BooleanOptionalAction, default=None,
                   help="run the text encoder under a causal mask, as CLIP's is, so each token's state carries what came "
                   "before it (default: the --init model's, else off); saved with the model")
    p.add_argument("--text-words", type=float, default=None, metavar="SCALE",
                   help="add SCALE x each token's input word embedding to its state, which keeps relation words apart "
                   "(MiniLM's output states blur them; default: the --init model's, else 0); saved with the model")
    p.add_argument("--relations", nargs="+", default=list(RELATIONS), choices=RELATIONS, metavar="RELATION",
                   help="train on these relations' scenes only (counts always), e.g. --relations 'left of' above "
                   "as a curriculum's first stage; default all four")
    p.add_argument("--mean-weight", type=float, default=0.0, metavar="W",
                   help="add W x the loss at t = 1 against each prompt's mean latent (over --mean-renders renders): "
                   "a low-variance target where the layout is decided, which makes the model read the relation "
                   "(docs/history.md, 2026-12-02); default 0, off")
    p.add_argument("--mean-renders", type=int, default=32, help="renders averaged into each prompt's mean latent (default 32)")
    p.set_defaults(fn=cmd_pretrain_toy)

    p = sub.add_parser("widen-toy", help="a wider toy base computing what the base computes (Net2WiderNet copies): "
                       "a trained model whose GEMMs dominate, for explore-cost studies")
    p.add_argument("--width", type=int, required=True, help="new width: a multiple of the model's (the toy's 128)")
    p.add_argument("--split-noise", type=float, default=0.5, help="how unequal the copies' shares of each input weight "
                   "are (0: equal; they always add up to the original)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--model-path", default=None, help="the model to widen; default: the shipped toy base")
    p.add_argument("--out", required=True, help="output model directory")
    p.set_defaults(fn=cmd_widen_toy)

    p = sub.add_parser("toy-split", help="measure the base per toy prompt and write the hard splits "
                       "(hard_train / hard_heldout: the prompts it rarely gets right)")
    p.add_argument("which", choices=["hard"], help="which split family")
    p.add_argument("--seeds", type=int, default=16, help="images per prompt (default 16)")
    p.add_argument("--max-strict", type=float, default=0.25, help="keep prompts whose base strict accuracy is <= this (default 0.25)")
    p.add_argument("--reward", default="geneval_gold", help="the reward whose strict part is measured (default: the toy presets')")
    p.add_argument("--max-prompts", type=int, default=0, help="measure only the first N prompts of each split (0 = all)")
    p.add_argument("--out", default="runs/toy_splits", help="directory for hard_train.txt and hard_heldout.txt")
    _common_model_args(p)
    _sampling_args(p)
    p.set_defaults(fn=cmd_toy_split)

    p = sub.add_parser("pretrain-toy-autoencoder", help="train the toy autoencoder (32x32 RGB <-> 8x8x8 latents) on rendered scenes")
    p.add_argument("--out", default="runs/toy_autoencoder")
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(fn=cmd_pretrain_toy_autoencoder)

    p = sub.add_parser("pretrain-toy-referee", help="train the referee (solrl/toyworld/referee.py), the toy world's judge "
                       "that nothing trains on, on drawn scenes whose truth is known")
    p.add_argument("--out", default="runs/toy_referee")
    p.add_argument("--steps", type=int, default=8000, help="the shipped referee's (27 minutes on 2 cores)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--autoencoder", default="solrl/assets/toy_base/autoencoder",
                   help="whose reconstructions the referee also learns from (the shipped base's)")
    p.set_defaults(fn=cmd_pretrain_toy_referee)
    return parser


def main(argv: list[str] | None = None) -> int:
    from .registry import UnknownName
    from .rewards.guard import RewardFault
    from .training.checkpoint import CheckpointError

    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    # dotted overrides may follow the options too (`bench convergence --minutes 3 train.lr=1e-4`): argparse
    # stops a positional list at the first option, so the ones after it come back unparsed
    if extra and hasattr(args, "overrides") and all("=" in a and not a.startswith("-") for a in extra):
        args.overrides = [*(args.overrides or []), *extra]
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        return args.fn(args)
    # bad input, named and explained (ConfigError is a ValueError); any other exception is a bug: traceback
    except (ValueError, UnknownName, FileNotFoundError, CheckpointError, RewardFault) as exc:
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"solrl {args.command}: error: {msg}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
