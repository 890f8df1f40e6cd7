"""The check's `cost` section: a run's time, before it runs, for this machine's GPU and for W GPUs, from the
calibrated estimate (forecast.py) applied to the plan's model (its FLOPs per forward, flops.py), kernels and
settings; or from a measured prompt group (measure.py) where one was run."""
from __future__ import annotations

from .flops import forward_flops
from .forecast import (
    CALIBRATION_SOURCE,
    GroupCost,
    RunForecast,
    estimate_group,
    evaluation_seconds,
    forecast_run,
    gpu_peak,
)
from .plan import RunPlan, sample_shape
from .sources import family_class


def eval_prompt_count(cfg) -> int | None:
    """Prompts one evaluation scores: eval.max_prompts, or the split's size where it is here (None: unknown)."""
    from ..data import PromptSet

    try:
        return len(PromptSet.load(cfg.eval.split, cfg.eval.max_prompts))
    except (FileNotFoundError, ValueError):
        return cfg.eval.max_prompts or None


def estimated_group(plan: RunPlan) -> tuple[GroupCost | None, list[str]]:
    """One prompt group's estimated stage seconds on the plan's GPU, or None with the reason."""
    cfg, info = plan.cfg, plan.device
    family = family_class(cfg.model.name)
    if plan.transformer is None:
        return None, ["not estimated: the transformer's architecture is unknown here"]
    if not hasattr(family, "_forward") or info.type != "cuda":
        where = "the toy world" if cfg.model.name == "toy" else f"model.device={cfg.model.device}"
        return None, [f"not estimated for {where}: the calibration is a GPU's; `solrl check --measure` times one "
                      "prompt group on this machine"]
    peak, how = gpu_peak(info.label, info.capability)
    if peak is None:
        return None, [f"not estimated: {how}; describe the GPU with --gpu-name (e.g. H100) or time it with --measure"]
    flops = forward_flops(family, plan.transformer, sample_shape(cfg, plan.arch), plan.text_tokens)
    kernel = plan.explore.kernel if plan.explore is not None else None
    cost, notes = estimate_group(cfg, flops, peak, kernel.name if kernel else None, kernel.real if kernel else True,
                                 plan.checkpointing, trained_shape(cfg))
    return cost, [f"GPU speed: {how}; one forward {flops / 1e12:.1f} TFLOP per sample", *notes]


def trained_shape(cfg) -> tuple[int, int] | None:
    """(slots each sample trains, teacher forwards per trained pair), as the run's objective counts them, for the
    objectives the calibration covers (nft and awm: clean-sample training); None for the others."""
    from ..training.objectives import CleanSampleObjective, build_objective

    objective = build_objective(cfg)
    if not isinstance(objective, CleanSampleObjective):
        return None
    return objective.train_slots(cfg.train, cfg.sampling.steps), objective.teacher_forwards(cfg.train)


def stage_line(cost: GroupCost) -> str:
    train = "not estimated" if cost.train is None else f"{cost.train:.1f} s"
    explore = f"explore {cost.explore:.1f} s, " if cost.explore else ""
    return (f"one prompt group ({cost.basis}): {explore}generate {cost.regenerate:.1f} s, decode + score {cost.score:.1f} s, "
            f"train {train}: {cost.total:.1f} s")


def forecast_lines(plan: RunPlan, cost: GroupCost, gpus: tuple[int, ...], notes: list[str],
                   peak_gib: float | None) -> tuple[list[str], list[RunForecast]]:
    cfg = plan.cfg
    eval_seconds = evaluation_seconds(cfg, cost, eval_prompt_count(cfg))
    forecasts = [forecast_run(cfg, cost, w, eval_seconds) for w in gpus]
    head = ("ESTIMATES, calibrated on " + CALIBRATION_SOURCE if cost.basis == "estimate"
            else "MEASURED on this machine (one prompt group after the compile warm-up); the run extrapolated from it")
    unit = "GPU" if plan.device.type == "cuda" else "CPU process"
    lines = [head, stage_line(cost), *(f.line(cost.basis, unit) for f in forecasts)]
    for w in gpus:
        if cfg.train.prompts_per_iter % w:
            lines.append(f"train.prompts_per_iter={cfg.train.prompts_per_iter} does not divide among {w} GPUs: the "
                         "trainer refuses it; use a multiple")
    if peak_gib is not None:
        lines.append(f"peak memory per {unit}: {peak_gib:.1f} GiB ({'measured' if cost.basis == 'measured' else 'estimate'}; "
                     "the same on every one)")
    if eval_seconds is not None:
        lines.append(f"each evaluation {eval_seconds / 60:.1f} min (rank 0 evaluates alone; the others wait)")
    return [*lines, *notes], forecasts


def cost_section(plan: RunPlan, gpus: tuple[int, ...], measured=None) -> tuple[list[str], list[RunForecast]]:
    """Lines and forecasts from `measured` (a measure.Measured) where given, else from the estimate."""
    if measured is not None:
        return forecast_lines(plan, measured.cost, gpus, measured.notes, measured.peak_gib)
    cost, notes = estimated_group(plan)
    if cost is None:
        return notes, []
    return forecast_lines(plan, cost, gpus, notes, plan.memory.peak_gib if plan.memory else None)
