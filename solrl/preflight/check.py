"""`solrl check CONFIG`: what a run would do on this device (or a described one), before any weight is
loaded: the device, the explore recipe and kernel with the layers it quantizes, the compile scopes, the
prompt files and weights it needs (and whether a remote judge answers), its peak GPU memory and its time. It reads the same config, registries,
`select_kernel`, `choose_auto` and explore-layer rule as the trainer (nothing here decides them again),
and ends with every problem that would stop the run later, so a rented node is not spent finding them.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from ..config import Config
from ..data import TOY_SPLITS
from ..data.sets import fetch_hint
from ..models.compile import resolve_scope
from ..precision.recipes import RECIPES, DeviceInfo, choose_auto, get_recipe, select_kernel, torchao_status
from .cost import cost_section
from .memory import MemoryEstimate, fits, memory_problem
from .plan import RunPlan, make_plan
from .rewards import probe_remote
from .sources import model_location, reward_weights, weight_files, weights_present

PREVIEW = DeviceInfo("cuda", "NVIDIA H100/H200 (preview: no CUDA device here)", (9, 0), memory_gib=80.0)


@dataclass
class CheckReport:
    sections: list[tuple[str, list[str]]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    memory: MemoryEstimate | None = None
    plan: RunPlan | None = None
    forecasts: list = field(default_factory=list)   # forecast.RunForecast per GPU count asked for

    def add(self, title: str, *lines: str) -> None:
        self.sections.append((title, list(lines)))

    def set_cost(self, gpus: tuple[int, ...], measured=None) -> None:
        """The cost section (last), from the estimate or from `measured`: what --measure rewrites once it has timed."""
        lines, self.forecasts = cost_section(self.plan, gpus, measured)
        self.sections = [(title, body) for title, body in self.sections if title != "cost"] + [("cost", lines)]

    def render(self) -> str:
        out = []
        for title, lines in self.sections:
            out += [f"{title:<13}{lines[0] if lines else ''}", *(f"{'':<13}{line}" for line in lines[1:])]
        out.append("")
        if self.problems:
            out.append(f"{len(self.problems)} problem(s) would stop this run:")
            out += [f"  - {p}" for p in self.problems]
        else:
            out.append("no problem found: this run would start")
        return "\n".join(out)


def _device(cfg: Config, described: DeviceInfo | None, report: CheckReport) -> DeviceInfo:
    from ..precision.recipes import device_info

    if described is not None:
        report.add("device", f"{described.label} (described on the command line, not this machine)")
        return described
    try:
        info = device_info(cfg.model.device)
    except ValueError as exc:
        report.problems.append(str(exc))
        report.add("device", f"model.device={cfg.model.device}: none here; below, as on an {PREVIEW.label}",
                   "(describe another GPU with --capability, e.g. 10.0 for a B200, and --gpu-memory-gib)")
        return PREVIEW
    memory = f", {info.memory_gib:.1f} GiB" if info.memory_gib else ""
    report.add("device", f"{info.label}{memory}")
    return info


def _layer_summary(names: list[str]) -> str:
    """'norm1 x38, ff_context x76, ...': kept layers grouped by their last two name parts."""
    kinds = Counter(".".join(part for part in name.split(".")[-2:] if not part.isdigit()) for name in names)
    return ", ".join(f"{kind} x{n}" for kind, n in kinds.most_common(8)) + (", ..." if len(kinds) > 8 else "")


def _explore(cfg: Config, info: DeviceInfo, plan: RunPlan, report: CheckReport) -> None:
    r = cfg.rollout
    if r.family not in ("naive_quant", "sol_rl"):
        report.add("explore", f"rollout.family={r.family}: no explore engine")
        return
    recipe = get_recipe(r.explore_precision, info)
    lines = []
    if r.explore_precision == "auto":
        lines.append("rollout.explore_precision=auto -> {}: {}".format(*choose_auto(info)))
    kernel = select_kernel(recipe, info)
    lines.append(f"{recipe.name}: {kernel.name} ({'real kernel' if kernel.real else 'EMULATED'}): {kernel.note}")
    if not kernel.real and info.type == "cuda" and not r.allow_emulation:
        report.problems.append(f"rollout.explore_precision={recipe.name} has no real kernel on {info.label}; the trainer "
                               f"refuses it: use auto (here {choose_auto(info)[0]}) or set rollout.allow_emulation=true")
    others = [f"{name} {'real' if select_kernel(other, info).real else 'emulated'}" for name, other in RECIPES.items()]
    lines.append("every recipe here: " + ", ".join(others))
    if info.type == "cuda":   # the GPU kernels are torchao's: its version decides whether they run
        lines.append(torchao_status(info))
    ex = plan.explore
    if ex is None:
        report.add("explore", *lines, "layers: unknown without the transformer's config")
        return
    if recipe.weight_format is None:
        lines.append(f"layers: all {len(ex.quantized) + len(ex.kept)} linear layers in {recipe.name}, the LoRA merged")
    else:
        lines.append(f"layers ({r.explore_layers}): {ex.share.line()} in {recipe.name}; kept in {cfg.model.dtype}: "
                     f"{_layer_summary(ex.kept)}")
    report.add("explore", *lines)


def _prompts(cfg: Config, report: CheckReport) -> None:
    from pathlib import Path

    lines = []
    for key, source in (("train.prompts", cfg.train.prompts), ("eval.split", cfg.eval.split)):
        if source in TOY_SPLITS:
            lines.append(f"{key}: the toy world's {source} split")
        elif Path(source).is_file():
            lines.append(f"{key}: {source} (found)")
        else:
            lines.append(f"{key}: {source} MISSING")
            report.problems.append(f"{key}: {fetch_hint(source) or f'prompt file {source} does not exist'}")
    report.add("prompts", *lines)


def _weights(cfg: Config, plan: RunPlan, report: CheckReport) -> None:
    lines = []
    name, directory = model_location(cfg.model)
    files = weight_files(directory, cfg.model.name) if directory is not None else []
    if files:
        lines.append(f"model {name}: {directory} ({len(files)} transformer weight file(s))")
    else:
        where = f"{directory} holds no transformer weights" if directory else "not at model.path nor in the Hugging Face cache"
        lines.append(f"model {name}: MISSING ({where})")
        report.problems.append(f"model weights of {name} are not here ({where}); download them before renting the GPU "
                               f"(`huggingface-cli download {name}`; gated models need `huggingface-cli login` and the "
                               "licence accepted on the model page), or set model.path to a local copy")
    for option, source in reward_weights(cfg.reward):
        found = weights_present(source)
        lines.append(f"reward {option} {source}: {found or 'MISSING'}")
        if found is None:
            report.problems.append(f"reward weights {source} ({option}) are not here; `huggingface-cli download {source}` "
                                   "or set reward.options to a local copy")
    lines += [part.line() for part in plan.rewards]
    reached, unreachable = probe_remote(cfg.reward)
    report.problems += unreachable
    report.add("weights", *lines, *reached)


def run_check(cfg: Config, described: DeviceInfo | None = None, gpus: tuple[int, ...] = (1,), measured=None) -> CheckReport:
    """The check's report; `gpus`: the GPU counts to forecast the run's time for; `measured`: a prompt group
    measured on this machine (measure.measure_group), which the time forecast then rests on."""
    report = CheckReport()
    info = _device(cfg, described, report)
    plan = report.plan = make_plan(cfg, info)
    if plan.arch is None:
        report.add("model", f"{cfg.model.name} at {model_location(cfg.model)[0]}: architecture unknown (no config.json "
                            "here and not a checkpoint solrl knows); layers, memory and time are not estimated")
    else:
        size = f"{plan.params / 1e9:.2f}B" if plan.params >= 1e9 else f"{plan.params / 1e6:.1f}M"
        report.add("model", f"{plan.arch.class_name}, {size} parameters, from {plan.arch.source}")
    _explore(cfg, info, plan, report)
    model_scope = resolve_scope(cfg.model.compile, info.type)
    if cfg.train.parallel == "fsdp2" and cfg.model.compile == "auto":
        model_scope = "eager (train.parallel=fsdp2)"
    report.add("compile", f"model.compile={cfg.model.compile} -> {model_scope}; rollout.compile={cfg.rollout.compile} -> "
                          f"{resolve_scope(cfg.rollout.compile, info.type)} (first-call compile seconds are logged apart)")
    _prompts(cfg, report)
    _weights(cfg, plan, report)
    if plan.memory is not None:
        estimate = report.memory = plan.memory
        note = [plan.checkpointing_note] if plan.checkpointing_note else []
        report.add("memory", *note, *estimate.lines(info.memory_gib if info.type == "cuda" else None))
        if info.type == "cuda" and info.memory_gib and not fits(estimate, info.memory_gib):
            report.problems.append(memory_problem(estimate.peak_gib, info.memory_gib))
    report.set_cost(gpus, measured)
    return report
