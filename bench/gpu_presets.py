"""gpu_check's `presets` section: each GPU preset as shipped, at its released transformer's size
with random weights, for sol_rl and naive_scaling (and naive_scaling eager's rollout, the paper's baseline), through
the Trainer: the explore recipe and compile scopes `auto` chose, explore / regenerate / train seconds,
measured peak memory beside `solrl check`'s estimate. What differs from the preset, and why: the reward
is a random CNN (no reward weights offline), the text encoders and VAE are tiny random ones (the
transformer is what is timed; the estimate below leaves them out too), prompt groups per iteration
are `--preset-prompts` (48 do not fit the budget), there is no evaluation and no checkpoint.
"""
from __future__ import annotations

import time
from pathlib import Path

import torch

from solrl.rewards.base import REWARDS, Reward, RewardResult

CONFIGS = Path(__file__).resolve().parent.parent / "configs"
PROMPTS = ["a photo of a red bicycle leaning on a brick wall", "an astronaut riding a horse, oil painting",
           "a bowl of ramen with chopsticks, studio light", "two cats sleeping on a blue sofa"]
BUILT = ".built_by_gpu_presets"
VAE_LEVELS = {"sd3": 4, "flux": 4, "sana": 6, "qwen_image": 3}   # the released VAE factors: 8, 8, 32, 8
TARGETS = {"sol_rl_rollout_over_naive_scaling": 1.35, "sol_rl_rollout_over_eager_naive_scaling": 2.2,
           "sol_rl_iteration_over_naive_scaling": 1.3}


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


def register_random_reward() -> None:
    if RandomCNNReward.name not in REWARDS:
        REWARDS.register(RandomCNNReward.name)(RandomCNNReward)


def preset_overrides(args, preset: Path, model_dir: Path, prompts: Path, run_dir: Path, family: str, eager: bool) -> list[str]:
    overrides = [f"model.path={model_dir}", f"model.device={args.device}", "reward.name=gpu_check_random_cnn", "reward.options={}",
                 f"train.prompts={prompts}", f"eval.split={prompts}", f"train.prompts_per_iter={args.preset_prompts}",
                 f"rollout.family={family}", f"out_dir={run_dir}", "train.eval_every=0", "train.checkpoint_every=0"]
    if eager:
        overrides += ["model.compile=eager", "rollout.compile=eager"]
    if args.tiny:   # the CPU smoke run: the tiny transformer at a CPU-sized shape
        overrides += ["model.resolution=32", "model.dtype=float32", "train.autocast_bf16=false", "rollout.explore_seeds=8",
                      "train.group_size=4", "sampling.batch_size=4", "train.micro_batch=4"]
    return overrides


def build_preset_model(args, family: str, transformer: dict, path: Path) -> Path:
    from solrl.testing.random_pipelines import build_random_pipeline

    cuda = torch.device(args.device).type == "cuda"
    with torch.device(args.device if cuda else "cpu"):   # random init on the GPU: seconds instead of minutes
        pipe = build_random_pipeline(family, transformer_config=transformer, vae_levels=2 if args.tiny else VAE_LEVELS[family])
    if cuda:
        pipe.to(torch.bfloat16)
    pipe.save_pretrained(str(path))
    (path / BUILT).touch()   # last: a build cut short is not taken for a whole one
    del pipe
    return path


def _rollout_seconds(trainer) -> dict:
    """One iteration's rollout alone, stage seconds as the Trainer logs them: the eager baseline serves only
    the rollout ratio, and an SD3.5-L training step would cost the run's budget a second time."""
    return {f"seconds_{k}": v for k, v in trainer.rollout(0).seconds.items()}


def _one_run(cfg, iterations: int, device: str, rollout_only: bool = False) -> dict:
    from solrl.precision.recipes import device_info
    from solrl.preflight import run_check
    from solrl.preflight.gate import gate
    from solrl.training.trainer import Trainer

    cuda = torch.device(device).type == "cuda"
    cfg.model.gradient_checkpointing = gate(cfg)   # as solrl train decides it (the presets say auto)
    estimate = run_check(cfg, device_info(device) if cuda else None).memory
    peaks = StagePeaks(device) if cuda else None
    trainer = Trainer(cfg, quiet=True)
    if peaks:
        peaks.stage("warm_up")   # model load and the compile warm-up
        peaks.around_training(trainer)
    records = [_rollout_seconds(trainer)] if rollout_only else [trainer.run_iteration(i) for i in range(iterations)]
    last, first = records[-1] or {}, records[0] or {}
    keep = ("seconds_explore", "seconds_regenerate", "seconds_rollout", "seconds_train", "seconds_iteration",
            "seconds_reward_explore", "seconds_sync", "proxy_full_spearman")
    row = {**{k: round(last[k], 3) for k in keep if isinstance(last.get(k), float)},
           "seconds_compile": round(first.get("seconds_compile", 0.0), 1),
           "explore_engine": trainer.engine.label if trainer.engine is not None else None,
           "auto_choice": list(trainer.engine.choice) if trainer.engine is not None and trainer.engine.choice else None,
           "model_compile": cfg.model.compile, "rollout_compile": cfg.rollout.compile, "rollout_only": rollout_only,
           "estimated_peak_gib": round(estimate.peak_gib, 2) if estimate else None}
    if peaks:
        if rollout_only:   # else the training step closed each stage
            peaks.stage("rollout")
        row.update(peaks.report())
    del trainer
    return row


class StagePeaks:
    """Peak device memory per stage of one run (warm-up, rollout, train) and what was already allocated
    when it began. The first H200 run read naive_scaling's peak 20 GiB over the estimate when it followed
    another run; a previous trainer not yet collected (compiled graphs hold cycles) would do that, so each
    run starts after a collection and says what it found allocated."""

    def __init__(self, device, allocated=None, peak=None, reset=None, reserved=None):
        import gc

        gc.collect()
        cuda = torch.cuda
        self.allocated = allocated or (lambda: cuda.memory_allocated(device))
        self.peak = peak or (lambda: cuda.max_memory_allocated(device))
        self.reset = reset or (lambda: cuda.reset_peak_memory_stats(device))
        self.reserved = reserved or (lambda: cuda.max_memory_reserved(device))
        if allocated is None:
            cuda.empty_cache()
        self.at_start = self.allocated()
        self.peaks: dict[str, int] = {}
        self.reserved_peak = 0
        self.reset()

    def stage(self, name: str) -> None:
        """Close the stage that ran since the last call, under `name`, the highest over iterations (a reset
        clears both peaks)."""
        self.peaks[name] = max(self.peaks.get(name, 0), self.peak())
        self.reserved_peak = max(self.reserved_peak, self.reserved())
        self.reset()

    def around_training(self, trainer) -> None:
        """Split each iteration at its training step: what ran before it is the rollout."""
        train_step = trainer._train_step

        def measured(*args, **kwargs):
            self.stage("rollout")
            out = train_step(*args, **kwargs)
            self.stage("train")
            return out
        trainer._train_step = measured

    def report(self) -> dict:
        gib = lambda b: round(b / 2**30, 2)  # noqa: E731
        return {"peak_memory_gib": gib(max(self.peaks.values())), "peak_reserved_gib": gib(self.reserved_peak),
                "allocated_at_start_gib": gib(self.at_start),
                "peak_by_stage_gib": {k: gib(v) for k, v in self.peaks.items()}}


def _ratios(runs: dict) -> dict:
    sol, naive, eager = runs.get("sol_rl", {}), runs.get("naive_scaling", {}), runs.get("naive_scaling_eager", {})
    pairs = {"sol_rl_rollout_over_naive_scaling": (naive.get("seconds_rollout"), sol.get("seconds_rollout")),
             "sol_rl_rollout_over_eager_naive_scaling": (eager.get("seconds_rollout"), sol.get("seconds_rollout")),
             "sol_rl_iteration_over_naive_scaling": (naive.get("seconds_iteration"), sol.get("seconds_iteration"))}
    out = {}
    for name, (slow, fast) in pairs.items():
        if slow and fast:
            out[name] = {"ratio": round(slow / fast, 3), "target": TARGETS[name], "met": slow / fast >= TARGETS[name]}
    return out


def preset_runs(args, deadline: float, save) -> dict:
    """Every preset of `args.presets` (e.g. sd35l_pickscore,flux1_pickscore): one model build, then sol_rl,
    naive_scaling and eager naive_scaling's rollout alone (`--preset-runs` chooses); a failing run is recorded and the
    next one goes on; `save(result)` after each step."""
    import tempfile

    from solrl.config import load_config
    from solrl.models.released import RELEASED
    from solrl.testing.random_pipelines import TINY_TRANSFORMERS

    register_random_reward()
    result: dict = {}
    for name in args.presets.split(","):
        preset = CONFIGS / f"{name}.yaml"
        shipped = load_config(preset)
        family = shipped.model.name
        transformer = TINY_TRANSFORMERS[family] if args.tiny else dict(RELEASED[shipped.model.path].transformer)
        mine = result[name] = {"family": family, "runs": {}}
        if time.perf_counter() > deadline:
            mine["skipped"] = "the run's budget was spent"
            continue
        with tempfile.TemporaryDirectory(prefix="solrl_gpu_presets_") as tmp:
            root = Path(tmp)
            began = time.perf_counter()
            model_dir = Path(args.preset_model_dir) / name if args.preset_model_dir else root / f"pipeline_{family}"
            if (model_dir / BUILT).exists():   # built whole by an earlier call on this machine
                mine["model_reused"] = str(model_dir)
            else:
                build_preset_model(args, family, transformer, model_dir)
            mine["build_seconds"] = round(time.perf_counter() - began, 1)
            prompts = root / "prompts.txt"
            prompts.write_text("\n".join(PROMPTS) + "\n")
            known = {"sol_rl": ("sol_rl", False), "naive_scaling": ("naive_scaling", False),
                     "naive_scaling_eager": ("naive_scaling", True)}
            plan = [(label, *known[label]) for label in args.preset_runs.split(",")]
            for label, rollout_family, eager in plan:
                if time.perf_counter() > deadline:
                    mine["runs"][label] = {"skipped": "the run's budget was spent"}
                    continue
                try:
                    cfg = load_config(preset, preset_overrides(args, preset, model_dir, prompts, root / label, rollout_family, eager))
                    mine["runs"][label] = _one_run(cfg, args.preset_iterations, args.device, rollout_only=eager)
                except Exception as exc:  # record and go on: the other runs of a paid-for GPU still count
                    import traceback

                    mine["runs"][label] = {"error": f"{type(exc).__name__}: {exc}"[:500],
                                           "where": traceback.format_exc().splitlines()[-3][:300]}
                print(f"preset {name} {label}: {mine['runs'][label]}")
                if torch.device(args.device).type == "cuda":
                    torch.cuda.empty_cache()
                mine["ratios"] = _ratios(mine["runs"])
                save(result)
    return result
