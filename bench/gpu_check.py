"""The GPU acceptance run (docs/gpu-acceptance.md): explore engines against the policy, eager and compiled;
naive_scaling vs sol_rl rollout seconds at the paper's shape; a few sol_rl iterations; the GPU presets as
shipped; one JSON.

    bash bench/gpu_check.sh                                  # one GPU, offline (installs carried wheels first)
    .venv/bin/python bench/gpu_check.py --arch sd35m --out gpu_check.json
    .venv/bin/python bench/gpu_check.py --dry-run            # CPU: size the architecture, print the plan
    .venv/bin/python bench/gpu_check.py --tiny --device cpu --out /tmp/g.json   # the whole path on a tiny model

The transformer is the released architecture (SD3.5-Medium or SANA-1.6B, built from its config,
random weights, nothing downloaded) behind tiny text encoders and a small VAE, so the figures are
the transformer's. Sections (a failing one is recorded and the next runs; the JSON is rewritten
after every step, so a run cut short keeps what it measured):
- speed (bench/gpu_speed.py): per compile setting, the forward ms of the LoRA policy and of each explore
  recipe with a real kernel, then one prompt group at the paper's shape through `run_rollout`;
- sol_rl: `--iterations` iterations through solrl.training.trainer.Trainer with a random-weight CNN reward;
- blackwell: the compiled NVFP4 engine against the compiled FP8 engine where the GPU is sm100+; elsewhere it
  says plainly that it was not run and why;
- presets (`--presets sd35l_pickscore`, bench/gpu_presets.py): a GPU preset as shipped, at its released size,
  sol_rl vs naive_scaling: stage seconds, peak memory beside `solrl check`'s estimate, the kernel chosen.
Before anything is imported beyond the standard library, the machine is checked: a missing package or CUDA
device is written to the JSON (`missing`, `optional_missing`) and nothing else runs.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# module -> what it serves: without a required one nothing runs; an optional one is said and the run goes on
REQUIRED = {"torch": "everything", "diffusers": "the model families", "peft": "the LoRA adapters",
            "transformers": "the text encoders", "safetensors": "saving the random models", "scipy": "the rollout's rank statistics",
            "yaml": "the presets"}
OPTIONAL = {"torchao": "the FP8 / NVFP4 / MX explore kernels (without it `auto` explores in bf16 and the fp8 rows are skipped)",
            "rapidfuzz": "the OCR reward only (not used by this run)"}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--arch", default="sd35m", help="one or more of sd35m, sd35l, flux1, sana16b, qwen_image, comma-separated")
    p.add_argument("--arch-sections", default="", help="per-arch sections, e.g. sana16b=sol_rl (default: --sections)")
    p.add_argument("--tiny", action="store_true", help="the tiny test transformer instead (CPU smoke run of this script)")
    p.add_argument("--device", default="cuda")
    p.add_argument("--resolution", type=int, default=1024)
    p.add_argument("--batch", type=int, default=24, help="images per forward in the forward timing (the rollout's)")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--recipes", default="bf16,fp8,int8,nvfp4_1x16,mxfp8")
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
                                                 "e.g. sd35l_pickscore; after the arch sections (gpu_check.sh: one per call)")
    p.add_argument("--preset-prompts", type=int, default=1, help="prompt groups per iteration in the presets section")
    p.add_argument("--preset-iterations", type=int, default=2)
    p.add_argument("--preset-runs", default="sol_rl,naive_scaling,naive_scaling_eager",
                   help="which runs per preset, in order: sol_rl, naive_scaling (each as `auto` chooses), "
                        "naive_scaling_eager (the paper's baseline; its rollout alone)")
    p.add_argument("--preset-model-dir", default="", help="keep each preset's random model here and reuse one "
                                                          "already there (a second call on a warm machine skips the build)")
    p.add_argument("--out", default="gpu_check.json")
    p.add_argument("--dry-run", action="store_true", help="no model run: size the architecture and print the plan")
    return p


def parse_args(argv=None):
    p = build_parser()
    return finish_args(p, p.parse_args(argv))


def finish_args(p: argparse.ArgumentParser, args):
    """The checks and derived fields that need solrl (so torch): after `missing_pieces` said torch is here."""
    from solrl.testing.random_pipelines import REAL_TRANSFORMERS

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
    from bench.gpu_presets import VAE_LEVELS
    from solrl.testing.random_pipelines import REAL_TRANSFORMERS, TINY_TRANSFORMERS

    args.family, args.transformer = ("sd3", TINY_TRANSFORMERS["sd3"]) if arch == "tiny" else REAL_TRANSFORMERS[arch]
    args.vae_levels = 2 if arch == "tiny" else VAE_LEVELS[args.family]


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ImportError:   # a parent package that is missing or broken
        return False


def missing_pieces(device: str) -> tuple[list[str], dict[str, str]]:
    """(what stops the run, what is missing but optional, with what it serves), said before anything is built;
    only the standard library is imported until torch is known to be here."""
    missing = [f"python package {name} ({why})" for name, why in REQUIRED.items() if not _importable(name)]
    optional = {name: why for name, why in OPTIONAL.items() if not _importable(name)}
    if _importable("torch"):
        import torch

        if device.startswith("cuda") and not torch.cuda.is_available():
            missing.append(f"a CUDA device (torch {torch.__version__}: torch.cuda.is_available() is False)")
        if "torchao" not in optional:
            from solrl.precision.recipes import torchao_problem, torchao_version

            problem = torchao_problem(torchao_version())
            if problem:
                optional["torchao"] = problem
    return missing, optional


def parameter_count(family: str, config: dict) -> int:
    """Parameters of the transformer, counted on the meta device (no memory, no weights)."""
    import diffusers
    import torch

    cls = {"sd3": diffusers.SD3Transformer2DModel, "sana": diffusers.SanaTransformer2DModel}[family]
    with torch.device("meta"):
        return sum(p.numel() for p in cls(**config).parameters())


def environment(device: str) -> dict:
    import importlib.metadata

    import torch

    def version(name):
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            return None

    env = {"torch": torch.__version__, "python": platform.python_version(), "device": device,
           **{name: version(name) for name in ("diffusers", "transformers", "peft", "torchao")}}
    if device.startswith("cuda"):
        env.update(gpu=torch.cuda.get_device_name(device), capability=".".join(map(str, torch.cuda.get_device_capability(device))),
                   memory_gib=round(torch.cuda.get_device_properties(device).total_memory / 2**30, 1))
    return env


def build_model_dir(args, root: Path) -> Path:
    import torch

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


def sol_rl_iterations(args, model_dir: Path, root: Path) -> list[dict]:
    import torch

    from bench.gpu_presets import PROMPTS, register_random_reward
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


def run_arch(args, arch: str, report: dict, start: float, save) -> dict:
    """Every section of one architecture: speed until its own deadline, the rest until the run's;
    a section that fails is recorded and the next one runs."""
    from bench.gpu_speed import _empty_cache, _error, speed
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


def _cannot_run(args, argv, out: Path, missing: list[str], optional: dict) -> dict:
    """The JSON of a machine that lacks what the run needs: what is missing, and that nothing ran."""
    report = {"plan": {"argv": list(argv if argv is not None else sys.argv[1:]), "device": args.device, "presets": args.presets, "arch": args.arch},
              "python": platform.python_version(), "missing": missing, "optional_missing": optional,
              "install_notes": [n for n in os.environ.get("GPU_CHECK_INSTALL_NOTES", "").splitlines() if n.strip()],
              "not_run": "every section: this machine lacks " + "; ".join(missing), "complete": False}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print("cannot run: this machine lacks " + "; ".join(missing) + ". Offline install: docs/gpu-acceptance.md")
    return report


def main(argv=None) -> dict:
    parser = build_parser()
    raw = parser.parse_args(argv)
    out = Path(raw.out)
    missing, optional = missing_pieces(raw.device) if not raw.dry_run else ([], {})
    if missing:
        return _cannot_run(raw, argv, out, missing, optional)
    args = finish_args(parser, raw)
    from solrl.testing.random_pipelines import REAL_TRANSFORMERS, TINY_TRANSFORMERS

    plan = {"argv": list(argv if argv is not None else sys.argv[1:]), "archs": args.archs, "transformer_parameters": {a: parameter_count(*(
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
    from bench.gpu_presets import preset_runs
    from bench.gpu_speed import blackwell_summary

    out.parent.mkdir(parents=True, exist_ok=True)
    notes = [n for n in os.environ.get("GPU_CHECK_INSTALL_NOTES", "").splitlines() if n.strip()]
    report = {"plan": plan, "environment": environment(args.device), "optional_missing": optional,
              "install_notes": notes, "complete": False}
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
