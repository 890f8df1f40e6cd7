"""How long a run takes, said before it runs: seconds per iteration and hours for the run on one GPU and on
W GPUs, from a calibrated estimate, or from one measured prompt group (`solrl check --measure`, measure.py).

The estimate scales one measurement: SD3.5-L's preset as shipped on one H200 (2026-12-04,
results/gpu/sd35l_preset_h200.json, the sol_rl row of the second call; one prompt group per iteration,
compiled by blocks, fp8 explore). From it come five numbers, each a ratio the estimate carries to other
models and GPUs:
- the policy's forward per sample: regenerating 24 samples at 10 steps took 14.73 s, 61.4 ms a forward,
  which is 51% of the H200's dense bf16 peak for SD3.5-L's 31.1 TFLOP (flops.py); other models are timed
  at their own FLOPs and the same share of their GPU's peak;
- the explore engine's forward against the policy's, per kernel (fp8 0.79, measured there; bf16 and int8
  from the 2026-11-30 H200 engine timings, results/gpu/engine_sd35m_h200_reference_layers.json; kernels
  never timed on a GPU use fp8's as a stand-in, said so);
- decoding and scoring: 44 ms an image (the iteration less rollout and training over the 120 images it
  scored; with a tiny VAE and a CNN reward, so the real VAE and reward model are not in it);
- training: 6.1 policy forwards per (sample, timestep) pair, with the old and reference teachers and
  gradient checkpointing; one forward less without checkpointing, one less per teacher left out;
- eager (not compiled) forwards: 1.60x the compiled ones (the eager naive_scaling rollout of the same day).

Read it as a sizing aid, not a promise: the same constants put SD3.5-M's compiled forward (batch 24) 14%
faster than it measured on the H200, and SANA-1.6B's at batch 8 twice as fast: smaller models and batches
reach less of the GPU's peak. `--measure` replaces the estimate where the GPU and the weights are at hand.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

# the measured run the estimate is calibrated on (results/gpu/sd35l_preset_h200.json, sol_rl, second call)
CALIBRATION_SOURCE = "SD3.5-L preset on one H200, 2026-12-04 (results/gpu/sd35l_preset_h200.json)"
MEASURED = {"seconds_explore": 27.771, "seconds_regenerate": 14.733, "seconds_rollout": 42.504,
            "seconds_train": 54.106, "seconds_iteration": 101.935, "seconds_compile": 80.3}
MEASURED_SHAPE = {"explored": 96, "explore_steps": 6, "regenerated": 24, "full_steps": 10, "train_pairs": 24 * 6,
                  "teachers": 2, "checkpointing": True}
CALIBRATION_FLOPS = 31.121114907648e12   # SD3.5-L forward, 1024 px, 77 + 256 text tokens (flops.forward_flops)
CALIBRATION_PEAK_TFLOPS = 989.4          # H200: dense bf16 tensor-core peak (NVIDIA's datasheet)
EAGER_FACTOR = 98.026 / 61.21            # eager / compiled naive_scaling rollout, SD3.5-L, H200, 2026-12-04 (first call)
# explore engine forward / compiled LoRA policy forward, per sample-step, by kernel. FP8's was measured with
# solrl's own torch._scaled_mm layer, which torchao's Float8 rowwise config has since replaced; torchao's ran
# 1-4% faster in the 2026-11-30 engine timings (results/gpu/engine_sd35m_h200_*), not credited here.
EXPLORE_FACTORS = {
    "torchao_float8": (MEASURED["seconds_explore"] / (96 * 6)) / (MEASURED["seconds_regenerate"] / (24 * 10)),
    "bf16": 577.72 / 615.29,    # SD3.5-M compiled, H200, 2026-11-30 (LoRA merged, no quantization)
    "int_mm": 603.2 / 615.29,   # idem, torch._int_mm
}
STAND_IN_KERNEL = "torchao_float8"       # for real kernels never timed on a GPU (NVFP4 / MX on Blackwell)

# dense bf16 tensor-core TFLOPS by GPU name (NVIDIA datasheets, without sparsity); first match wins
GPU_PEAKS = (("H100 PCIe", 756.0), ("H100 NVL", 835.0), ("GH200", 989.4), ("H200", 989.4), ("H100", 989.4), ("H800", 989.4),
             ("GB200", 2500.0), ("B200", 2250.0), ("B100", 1750.0), ("A100", 312.0), ("A800", 312.0), ("L40S", 362.0))
CAPABILITY_PEAKS = {(9, 0): ("an H100", 989.4), (10, 0): ("a B200", 2250.0), (8, 0): ("an A100", 312.0), (8, 9): ("an L40S", 362.0)}


def forward_seconds_calibrated() -> float:
    return MEASURED["seconds_regenerate"] / (MEASURED_SHAPE["regenerated"] * MEASURED_SHAPE["full_steps"])


def peak_efficiency() -> float:
    """The share of the GPU's dense bf16 peak the calibration run's compiled policy forward reached."""
    return CALIBRATION_FLOPS / (forward_seconds_calibrated() * CALIBRATION_PEAK_TFLOPS * 1e12)


def score_seconds_per_image() -> float:
    rest = MEASURED["seconds_iteration"] - MEASURED["seconds_rollout"] - MEASURED["seconds_train"]
    return rest / (MEASURED_SHAPE["explored"] + MEASURED_SHAPE["regenerated"])


def train_forwards_per_pair(teachers: int, checkpointing: bool) -> float:
    """Policy forwards one trained (sample, timestep) pair costs: calibrated with two teachers and
    checkpointing; each teacher is one forward, checkpointing recomputes one."""
    shape = MEASURED_SHAPE
    calibrated = MEASURED["seconds_train"] / shape["train_pairs"] / forward_seconds_calibrated()
    return calibrated - (shape["teachers"] - teachers) - (int(shape["checkpointing"]) - int(checkpointing))


def gpu_peak(label: str, capability: tuple[int, int]) -> tuple[float | None, str]:
    """(dense bf16 TFLOPS, how it was found) for a GPU by name, else by compute capability."""
    for name, tflops in GPU_PEAKS:
        if name.lower() in label.lower():
            return tflops, f"{name}'s dense bf16 peak, {tflops:g} TFLOPS"
    if capability in CAPABILITY_PEAKS:
        like, tflops = CAPABILITY_PEAKS[capability]
        return tflops, f"sm{capability[0]}{capability[1]}, taken as {like} ({tflops:g} TFLOPS dense bf16)"
    return None, f"no bf16 peak known for {label}"


@dataclass(frozen=True)
class GroupCost:
    """Seconds one prompt group costs in each stage of an iteration, on one GPU."""
    explore: float
    regenerate: float          # every full-precision generation (diffusionnft's and naive_scaling's whole rollout)
    score: float               # decoding and scoring every image the group draws
    train: float | None        # None: not estimated for this objective
    forward: float | None      # one policy forward per sample, what evaluations cost (None: not known)
    basis: str                 # "estimate" or "measured"
    compile_seconds: float = 0.0  # the first calls' compilation, once per process

    @property
    def total(self) -> float:
        return self.explore + self.regenerate + self.score + (self.train or 0.0)


def padded_samples(samples: int, batch: int) -> int:
    """Samples a sampler runs for `samples`: every forward is padded to the batch (rollout/generation.py)."""
    return math.ceil(samples / batch) * batch


def estimate_group(cfg, flops_per_forward: float, peak_tflops: float, kernel_name: str | None,
                   kernel_real: bool = True, checkpointing: bool | None = None,
                   trained: tuple[int, int] | None = None) -> tuple[GroupCost, list[str]]:
    """One prompt group's stage seconds from the model's FLOPs and the GPU's peak (`checkpointing`: the decided
    model.gradient_checkpointing, where the config says auto; `trained`: the objective's slots trained per sample
    and teacher forwards per trained pair, None where the calibration does not cover its training step); also the
    notes on what the figure rests on beyond the calibration (stand-ins, what is left out). Samples are counted as
    drawn, not padded: the sampler pads the iteration's last batch only, whichever group it ends."""
    c, r, s = cfg.train, cfg.rollout, cfg.sampling
    notes = []
    forward = flops_per_forward / (peak_efficiency() * peak_tflops * 1e12)
    if not (cfg.train.autocast_bf16 or cfg.model.dtype in ("bfloat16", "bf16")):
        notes.append("the model runs in fp32 here, the calibration in bf16: the figures are for bf16 and too low")
    policy_compiled = cfg.model.compile != "eager"
    forward_here = forward * (1.0 if policy_compiled else EAGER_FACTOR)
    cfg_passes = 2 if s.guidance != 1.0 else 1     # classifier-free guidance runs a second, unconditional forward
    explore = 0.0
    if r.family in ("sol_rl", "naive_quant"):
        factor = EXPLORE_FACTORS.get(kernel_name or "")
        if factor is None and kernel_real:
            factor = EXPLORE_FACTORS[STAND_IN_KERNEL]
            notes.append(f"the explore kernel {kernel_name} was never timed on a GPU: fp8's measured speed stands in")
        if factor is None:
            notes.append(f"the explore kernel {kernel_name} is an emulation: its time is not estimated (counted as bf16)")
            factor = EXPLORE_FACTORS["bf16"]
        steps = s.steps if r.family == "naive_quant" else r.explore_steps
        engine_compiled = r.compile != "eager"
        explore = r.explore_seeds * steps * forward * factor * cfg_passes * (
            1.0 if engine_compiled else EAGER_FACTOR)
    full = {"diffusionnft": c.group_size, "naive_scaling": r.explore_seeds, "sol_rl": c.group_size, "naive_quant": 0}[r.family]
    regenerate = full * s.steps * forward_here * cfg_passes
    images = full + (r.explore_seeds if r.family in ("sol_rl", "naive_quant") else 0)
    score = images * score_seconds_per_image()
    train = None
    if trained is not None:
        slots, teachers = trained
        on = cfg.model.gradient_checkpointing is True if checkpointing is None else checkpointing
        train = c.group_size * slots * forward_here * train_forwards_per_pair(teachers, on)
    else:
        notes.append(f"train.algorithm={c.algorithm}: its training step is not estimated (only nft and awm); --measure times it")
    notes.append("decoding and scoring are timed as in the calibration run (tiny VAE, CNN reward): a real VAE and "
                 "reward model cost more")
    compiles = policy_compiled or (r.family in ("sol_rl", "naive_quant") and r.compile != "eager")
    compile_seconds = MEASURED["seconds_compile"] if compiles else 0.0
    return GroupCost(explore, regenerate, score, train, forward_here, "estimate", compile_seconds), notes


def evaluation_seconds(cfg, cost: GroupCost, eval_prompts: int | None) -> float | None:
    """One held-out evaluation: every prompt's seeds at eval.steps (padded batches) plus scoring them."""
    if eval_prompts is None or cost.forward is None:
        return None
    e = cfg.eval
    images = eval_prompts * e.seeds_per_prompt
    passes = 2 if e.guidance != 1.0 else 1
    return padded_samples(images, cfg.sampling.batch_size) * e.steps * cost.forward * passes + images * score_seconds_per_image()


def evaluations(cfg) -> int:
    """How many evaluations a whole run makes: the base, every eval_every iterations before the last, the end."""
    every, iterations = cfg.train.eval_every, cfg.train.iterations
    return 2 + ((iterations - 1) // every if every else 0)


@dataclass(frozen=True)
class RunForecast:
    gpus: int
    groups_per_gpu: int
    iteration_seconds: float
    train_hours: float          # iterations x iteration
    eval_hours: float | None    # every evaluation (rank 0 evaluates: it does not shrink with more GPUs)
    compile_seconds: float

    @property
    def hours(self) -> float:
        return self.train_hours + (self.eval_hours or 0.0) + self.compile_seconds / 3600

    def line(self, basis: str, unit: str = "GPU") -> str:
        evals = "evaluations not estimated" if self.eval_hours is None else f"evaluations {self.eval_hours:.1f} h"
        units = unit if self.gpus == 1 else unit + "s"
        return (f"{self.gpus} {units}: {self.groups_per_gpu} prompt group(s) each, {self.iteration_seconds / 60:.1f} min per "
                f"iteration ({basis}); the run {_duration(self.hours)} (training {self.train_hours:.1f} h, {evals}), "
                f"{self.hours * self.gpus:.0f} {unit}-hours")


def _duration(hours: float) -> str:
    return f"{hours:.1f} h" if hours < 48 else f"{hours:.0f} h = {hours / 24:.1f} days"


def forecast_run(cfg, cost: GroupCost, gpus: int, eval_seconds: float | None) -> RunForecast:
    """The whole run on `gpus` GPUs (train.parallel=replicate: each GPU runs its share of the prompt groups;
    checkpoints and the per-iteration all-reduce of the LoRA gradients are left out, seconds at most)."""
    groups = math.ceil(cfg.train.prompts_per_iter / gpus)
    iteration = groups * cost.total
    iterations = cfg.train.iterations
    if cfg.train.time_budget_minutes:
        iterations = min(iterations, math.ceil(cfg.train.time_budget_minutes * 60 / iteration))
    eval_hours = None if eval_seconds is None else evaluations(cfg) * eval_seconds / 3600
    return RunForecast(gpus, groups, iteration, iterations * iteration / 3600, eval_hours, cost.compile_seconds)
