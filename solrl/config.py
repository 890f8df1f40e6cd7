"""Typed configuration: dataclasses with defaults, YAML presets, dotted command-line overrides.

`load_config("configs/toy.yaml", ["train.lr=1e-4"])` returns a validated `Config`. An unknown
key or a wrongly typed value raises `ConfigError` naming the key and the closest valid one.
"""
from __future__ import annotations

import dataclasses
import difflib
import logging
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import yaml

from .config_checks import config_errors
from .textfiles import read_utf8

log = logging.getLogger("solrl.config")


class ConfigError(ValueError):
    """A configuration that cannot be used; the message names the key and the fix."""


# The vocabulary of every setting with a fixed set of values; the modules that act on them take
# their lists from here (typing.get_args), so a value is written once.
Solver = Literal["euler", "dpm2"]
# "eager": not compiled ("off" would read as false in YAML); "auto": blocks on a CUDA device, eager on a CPU
CompileScope = Literal["auto", "eager", "blocks", "model"]
Dtype = Literal["float32", "bfloat16", "float16", "fp32", "bf16", "fp16"]  # devices.DTYPES
FaultPolicy = Literal["skip", "stop"]
AdvMode = Literal["continuous", "positive_only", "negative_only", "one_only", "binary"]
DecaySchedule = Literal["copy", "linear_to_0_5", "delayed_linear_to_0_999"]
LRSchedule = Literal["constant", "cosine"]
ParallelMode = Literal["replicate", "fsdp2"]
Algorithm = Literal["nft", "flow_grpo", "flow_grpo_fast", "dance_grpo", "awm"]
SDEType = Literal["sde", "cps"]
AWMWeighting = Literal["uniform", "ghuber"]
RolloutFamily = Literal["diffusionnft", "naive_scaling", "naive_quant", "sol_rl"]
SelectionMode = Literal["best_worst", "random", "mean_deviation", "extremes_random"]
ExploreLayers = Literal["reference", "all"]
ContrastRule = Literal["balanced", "strict", "spread"]  # when adaptive exploration has found what it explores for (rollout/adaptive.py)


def compile_scope(value: str | bool) -> str:
    """A compile setting as a scope name: true / false (YAML's reading of on / off) mean blocks / eager."""
    return ("blocks" if value else "eager") if isinstance(value, bool) else value


@dataclass
class ModelConfig:
    name: str = "toy"                # model family: see solrl.models.MODELS
    path: str | None = None          # checkpoint directory or hub id; None = the shipped toy base model
    shift: float | None = None       # timestep-schedule shift; None = the model's own default
    # diffusers families (sana, flux, sd3, qwen_image); the toy model runs in float32 on the CPU
    dtype: Dtype = "float32"         # base weight dtype (GPU presets: bfloat16, as the FLUX.1 / SANA references; SD3.5 float32); LoRA stays float32
    device: str = "cpu"              # cpu | cuda | cuda:N
    resolution: int | None = None    # image side in pixels; None = the model's native size
    gradient_checkpointing: bool | Literal["auto"] = False  # recompute transformer activations in the backward pass; auto: only where `solrl check`'s memory estimate says the step would not fit without
    offload: bool = False            # text encoders and VAE stay on the CPU, visiting `device` only while used
    vae_tiling: bool = False         # decode in tiles (large images on small GPUs)
    options: dict[str, typing.Any] = field(default_factory=dict)  # family extras: max_sequence_length, truncate_prompts, embedded_guidance (flux), complex_human_instruction (sana)
    compile: CompileScope | bool = "auto"  # torch.compile the policy (rollouts, regeneration, training): solrl/models/compile.py

    def __post_init__(self):
        self.compile = compile_scope(self.compile)


@dataclass
class SamplingConfig:
    steps: int = 10                  # ODE steps for rollouts
    solver: Solver = "euler"         # both deterministic
    guidance: float = 1.0            # classifier-free guidance scale; 1.0 = CFG-free (the references' rollouts)
    batch_size: int = 64             # images per forward pass; every pass is padded to it (bitwise-stable seeds)


@dataclass
class RewardConfig:
    name: str = "geneval"            # see solrl.rewards.REWARDS
    weights: dict[str, float] = field(default_factory=dict)  # for name=multi: reward name -> weight
    options: dict[str, typing.Any] = field(default_factory=dict)  # keyword arguments of the reward (model path, device, ...)
    on_fault: FaultPolicy = "skip"   # what a raising / hanging / NaN reward does (docs/reliability.md)
    timeout_seconds: float = 0.0     # give up on a reward call after this long (0 = wait forever)


@dataclass
class EvalConfig:
    split: str = "heldout"           # toy-world split (train | heldout | hard_train | hard_heldout) or a prompt file
    seeds_per_prompt: int = 2        # fixed seeds 0..n-1 per prompt, so evaluations compare
    steps: int = 10                  # ODE steps
    solver: Solver = "euler"         # euler | dpm2 (DPM-Solver++(2M)), both deterministic
    guidance: float = 1.0            # classifier-free guidance scale; 1.0 = CFG-free
    max_prompts: int = 0             # 0 = every prompt of the split
    grid_prompts: int = 16           # prompts shown in the PNG grid
    ema: bool = False                # evaluate an EMA of the trained LoRA (the references do, and the GPU presets; off here so toy figures stay comparable)
    ema_decay: float = 0.9           # the EMA's decay cap: min((1 + step) / (10 + step), ema_decay), as DiffusionNFT


@dataclass
class LoraSection:
    rank: int = 32                   # LoRA rank (references: 32; 64 for Qwen-Image)
    alpha: float = 64.0              # LoRA alpha; scale = alpha / rank
    init: str = "gaussian"           # gaussian (A ~ N(0, 1/r), B = 0) | default (kaiming A, B = 0) | any peft init_lora_weights name
    dropout: float = 0.0             # LoRA dropout (references: 0)
    target_modules: list[str] | None = None  # None = the model family's own list (its `lora_target_modules`)


@dataclass
class NFTSection:
    """DiffusionNFT (train.algorithm=nft)."""
    beta: float = 1.0                # mixing strength of the implicit positive / negative policies (VeRL-Omni: mix_beta)
    ref_kl_coef: float = 0.0         # weight of mean (v_theta - v_ref)^2; the references and GPU presets: 1e-4 (0 here: no reference forward on a CPU)
    adv_mode: AdvMode = "continuous" # advantage -> optimality: continuous (clipped A) | positive_only | negative_only | one_only (A > 0) | binary (sign A)
    adaptive_weight: bool = True     # official adaptive x0 weighting; False = plain velocity MSE
    batch_old_ref: bool = False      # old + reference predictions as one mixed-adapter forward (slower on a CPU: results/training/old_ref_batching.json)


@dataclass
class GRPOSection:
    """Flow-GRPO and Flow-GRPO-Fast (clip_range also DanceGRPO's)."""
    clip_range: float = 1e-4         # PPO ratio clip (both papers: 1e-4)
    kl_coef: float = 0.04            # weight of the closed-form step KL to the reference (paper: 0.04; 0 = off)
    timestep_fraction: float = 0.99  # share of the SDE steps trained per sample (paper: 0.99; Fast trains its whole window)
    sde_type: SDEType = "sde"        # sde (sigma_t = a sqrt(t / (1 - t))) | cps (coefficients-preserving)
    noise_level: float = 0.7         # a of the sde sampler (paper: 0.7); eta in [0, 1] of the cps sampler
    window_size: int = 2             # Flow-GRPO-Fast: consecutive SDE steps, a random window in the first half (ODE elsewhere)


@dataclass
class DanceSection:
    """DanceGRPO."""
    eta: float = 0.3                 # constant diffusion sigma_t = eta (paper: 0.3)
    timestep_fraction: float = 0.6   # share of the steps trained per sample (paper: 0.6)


@dataclass
class AWMSection:
    """Advantage Weighted Matching."""
    old_kl_coef: float = 1.0         # weight of mean (v_theta - v_old)^2, its EMA-policy regulariser (recipe: 1)
    ref_kl_coef: float = 0.003       # weight of mean (v_theta - v_ref)^2 (recipe: 0.003)
    weighting: AWMWeighting = "ghuber"  # uniform | ghuber (the recipe's: t (l^0.25 - d) / 0.25 on the matching error l)


@dataclass
class TrainConfig:
    prompts: str = "train"           # toy split name (train, hard_train, ...: solrl.data.TOY_SPLITS) or a .txt/.jsonl/.parquet prompt file
    iterations: int = 100            # rollout + update rounds
    prompts_per_iter: int = 8        # prompt groups per iteration (references: 48)
    group_size: int = 12             # images per prompt, K (references: 24)
    lr: float = 3e-4                 # AdamW learning rate
    lr_schedule: LRSchedule = "constant"  # cosine: from lr down to lr * lr_final_ratio over train.iterations' optimizer steps
    lr_final_ratio: float = 0.1      # cosine's last rate as a share of lr
    betas: list[float] = field(default_factory=lambda: [0.9, 0.999])  # AdamW betas
    weight_decay: float = 1e-4       # AdamW weight decay
    grad_clip: float = 1.0           # max grad norm; a non-finite norm skips the step
    micro_batch: int = 32            # (sample, timestep) pairs per forward/backward
    updates_per_iteration: int = 1   # optimizer steps per rollout, as the references: each group's samples, shuffled, cut into this many shares, one step each; `old` refreshed after the last
    timestep_fraction: float = 0.5   # share of the rollout's timesteps trained per sample (nft, awm); references: 0.99 DiffusionNFT, 0.6 / 0.4 Sol-RL SD3.5-L and SANA / FLUX.1 (the presets set theirs)
    adv_clip_max: float = 5.0        # C: advantage clip and loss scale
    global_std: bool = True          # normalise advantages by the batch std (else per group)
    old_policy_decay_schedule: DecaySchedule = "linear_to_0_5"  # how the old adapter's EMA decay grows with the step (training/schedules.py)
    old_policy_decay: float | None = None  # a fixed decay overrides the schedule
    old_policy_update_interval: int = 1    # optimizer steps between old-adapter refreshes
    autocast_bf16: bool = False      # bf16 autocast for rollouts and the training forward (the references and GPU presets: on; slower on an AVX2 CPU)
    time_budget_minutes: float = 0.0 # stop after this much training wall-clock, evaluations left out (0 = run all iterations)
    eval_every: int = 5              # iterations between held-out validations (0 = only at the end)
    checkpoint_every: int = 10       # iterations between checkpoints (0 = only at the end)
    checkpoint_minutes: float = 0.0  # also checkpoint after an iteration once this much wall clock has passed since the last checkpoint (0 = off)
    progress_seconds: float = 30.0   # inside an iteration, a progress line (stage, prompt group, time left) at most this often (0 = every group)
    keep_checkpoints: int = 2        # keep the newest N checkpoints
    max_skipped_iterations: int = 3  # consecutive iterations lost to reward failures before stopping
    memory_check: bool = True        # on a GPU, stop before loading anything where `solrl check`'s memory estimate says the run does not fit (false: try anyway)
    parallel: ParallelMode = "replicate"  # under torchrun: replicate (whole model per rank, LoRA grads all-reduced) | fsdp2 (fully_shard)
    algorithm: Algorithm = "nft"     # the objective (solrl/training/objectives/); its own settings are in its section
    nft: NFTSection = field(default_factory=NFTSection)
    grpo: GRPOSection = field(default_factory=GRPOSection)
    dance: DanceSection = field(default_factory=DanceSection)
    awm: AWMSection = field(default_factory=AWMSection)


@dataclass
class RolloutConfig:
    family: RolloutFamily = "diffusionnft"  # diffusionnft (K in K) | naive_scaling | naive_quant | sol_rl
    explore_seeds: int = 48          # N seeds explored per prompt (paper: 96); K = train.group_size
    explore_precision: str = "auto"  # explore recipe: auto (the device's fastest real kernel: precision/recipes.py) | fp32 | bf16 | int8 | fp8 | mxfp8 | mxfp4 | nvfp4 ...
    allow_emulation: bool = False    # let a GPU run a recipe it has no kernel for, as a slow exact emulation (numerics studies)
    explore_steps: int = 6           # explore step budget (paper: 6; full budget = sampling.steps)
    selection: SelectionMode = "best_worst"  # which K of N: best_worst (K//2 best, the rest worst) | random | mean_deviation | extremes_random
    explore_layers: ExploreLayers = "reference"  # reference (keep in bf16 what the Sol-RL reference keeps, per family) | all
    compile: CompileScope | bool = "auto"  # torch.compile the explore engine (quantization fused with its neighbours)
    adaptive: bool = False           # sol_rl: explore each prompt in chunks until its proxy rewards show contrast, explore_seeds at most (rollout/adaptive.py)
    adaptive_chunk: int = 0          # seeds per prompt per chunk, K..N; 0 = 2K (at most N): a chunk of K would select all it explored
    adaptive_contrast: ContrastRule = "balanced"  # balanced: K//2 successes and K - K//2 failures under the reward's strict part | strict: one of each | spread: proxy max - min >= adaptive_min_spread
    adaptive_min_spread: float = 0.1 # the proxy spread that counts as contrast under adaptive_contrast=spread; in the reward's units:
                                     # set it from `solrl probe --seeds <chunk> --reward <name>`'s proxy_spread (its p50 sends half the prompts on)

    def __post_init__(self):
        self.compile = compile_scope(self.compile)


@dataclass
class Config:
    seed: int = 0                    # global seed (data order, training noise)
    out_dir: str = "runs/default"    # where run artefacts go
    wandb_project: str | None = None # also log to Weights & Biases (pip install wandb) under this project
    model: ModelConfig = field(default_factory=ModelConfig)
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    reward: RewardConfig = field(default_factory=RewardConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    lora: LoraSection = field(default_factory=LoraSection)
    train: TrainConfig = field(default_factory=TrainConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)


def _suggest(key: str, valid: list[str]) -> str:
    close = difflib.get_close_matches(key, valid, n=1, cutoff=0.5)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"{hint} Valid keys: {', '.join(valid)}"


def _check_value(path: str, value, hint):
    """Return `value` converted to the annotated type, or raise ConfigError naming `path`."""
    origin = typing.get_origin(hint)
    if origin is Literal:
        options = typing.get_args(hint)
        if isinstance(value, str) and value in options:
            return value
        close = difflib.get_close_matches(str(value), options, n=1, cutoff=0.5)
        hint_text = f"; did you mean {close[0]!r}?" if close else ""
        raise ConfigError(f"{path} {value!r} is not one of {', '.join(options)}{hint_text}")
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(hint)
        if value is None and type(None) in options:
            return None
        errors = []
        for option in options:
            if option is type(None):
                continue
            try:
                return _check_value(path, value, option)
            except ConfigError as exc:
                errors.append(str(exc))
        raise ConfigError(errors[0])
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{path}: expected a mapping, got {value!r}")
        key_t, val_t = typing.get_args(hint)
        return {_check_value(f"{path}.{k}", k, key_t): _check_value(f"{path}.{k}", v, val_t) for k, v in value.items()}
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{path}: expected a list, got {value!r}")
        (item_t, *_) = typing.get_args(hint) or (typing.Any,)
        return origin(_check_value(f"{path}[{i}]", v, item_t) for i, v in enumerate(value))
    if hint is typing.Any:
        return value
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if hint is float and isinstance(value, str):  # YAML reads "1e-4" as a string
        try:
            return float(value)
        except ValueError:
            pass
    if not isinstance(value, hint) or (hint is int and isinstance(value, bool)):
        raise ConfigError(f"{path}: expected {hint.__name__}, got {type(value).__name__} {value!r}")
    return value


# train keys of earlier versions -> their place in the per-algorithm sections (still read, with a warning)
RENAMED_TRAIN_KEYS = {
    "nft_beta": "nft.beta", "ref_kl_coef": "nft.ref_kl_coef", "adv_mode": "nft.adv_mode",
    "adaptive_weight": "nft.adaptive_weight", "batch_old_ref": "nft.batch_old_ref",
    "grpo_clip_range": "grpo.clip_range", "grpo_kl_coef": "grpo.kl_coef", "grpo_timestep_fraction": "grpo.timestep_fraction",
    "sde_type": "grpo.sde_type", "sde_noise_level": "grpo.noise_level", "sde_window_size": "grpo.window_size",
    "dance_eta": "dance.eta", "dance_timestep_fraction": "dance.timestep_fraction",
    "awm_old_kl_coef": "awm.old_kl_coef", "awm_ref_kl_coef": "awm.ref_kl_coef", "awm_weighting": "awm.weighting",
}


def migrate(data: dict) -> dict:
    """A config dict with renamed keys moved to their new place (a copy; a warning names each move)."""
    train = data.get("train")
    if not isinstance(train, dict) or not RENAMED_TRAIN_KEYS.keys() & train.keys():
        return data
    train = dict(train)
    for old, new in RENAMED_TRAIN_KEYS.items():
        if old in train:
            section, key = new.split(".")
            train[section] = {key: train.pop(old), **(train.get(section) or {})}  # the new name wins
            log.warning("config key train.%s is now train.%s; the old name still works but will go", old, new)
    return {**data, "train": train}


def from_dict(cls, data: dict, prefix: str = ""):
    """Build dataclass `cls` from a nested dict, validating every key and type."""
    if not isinstance(data, dict):
        raise ConfigError(f"{prefix or 'config'}: expected a mapping, got {data!r}")
    if cls is Config:
        data = migrate(data)
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    kwargs = {}
    for key, value in data.items():
        path = f"{prefix}{key}"
        if key not in hints:
            raise ConfigError(f"unknown config key {path!r}" + _suggest(key, names))
        hint = hints[key]
        if dataclasses.is_dataclass(hint):
            kwargs[key] = from_dict(hint, value, prefix=f"{path}.")
        else:
            kwargs[key] = _check_value(path, value, hint)
    return cls(**kwargs)


def check_types(obj, prefix: str = "") -> None:
    """Check a dataclass built or changed in code as from_dict checks one read from YAML."""
    hints = typing.get_type_hints(type(obj))
    for f in dataclasses.fields(obj):
        value, hint = getattr(obj, f.name), hints[f.name]
        if dataclasses.is_dataclass(hint):
            check_types(value, f"{prefix}{f.name}.")
        else:
            _check_value(f"{prefix}{f.name}", value, hint)


def to_dict(cfg) -> dict:
    return dataclasses.asdict(cfg)


def apply_override(data: dict, override: str) -> None:
    """Apply `a.b.c=value` (value parsed as YAML) to the nested dict in place."""
    if "=" not in override:
        raise ConfigError(f"override {override!r} must look like key.sub=value, e.g. train.lr=1e-4")
    key, raw = override.split("=", 1)
    try:
        value = yaml.safe_load(raw) if raw.strip() else None
    except yaml.YAMLError as exc:
        raise ConfigError(yaml_error_message(f"the value of override {override!r}", exc)) from None
    key = key.strip()
    if key.startswith("train.") and key[len("train."):] in RENAMED_TRAIN_KEYS:  # an override wins over the preset's new key
        new = "train." + RENAMED_TRAIN_KEYS[key[len("train."):]]
        log.warning("config key %s is now %s; the old name still works but will go", key, new)
        key = new
    *parents, leaf = key.split(".")
    node = data
    for part in parents:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"override {override!r}: {part!r} is not a section")
    node[leaf] = value


def yaml_error_message(where: str, exc: yaml.YAMLError) -> str:
    """`<where>, line L, column C: <what the parser expected>` plus the usual fixes."""
    mark, opened = getattr(exc, "problem_mark", None), getattr(exc, "context_mark", None)
    place = f", line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    problem = ": ".join(str(p) for p in (getattr(exc, "context", None), getattr(exc, "problem", None)) if p) or str(exc)
    if opened is not None and mark is not None and (opened.line, opened.column) != (mark.line, mark.column):
        problem += f" (begun at line {opened.line + 1}, column {opened.column + 1})"
    return (f"{where}{place}: YAML syntax error: {problem}; check for an unclosed quote or bracket, a missing ': ' "
            "after a key, or tabs in the indentation")


def load_config(path: str | Path | None = None, overrides: list[str] = (), cls=Config):
    """Defaults <- YAML preset (optional) <- dotted overrides, validated into `cls`; a whole `Config`
    also passes every check across settings (config_checks.py) here, once."""
    data: dict = {}
    if path is not None:
        path = Path(path)
        if not path.exists():
            raise ConfigError(f"config file {path} does not exist; presets live in configs/")
        try:
            data = yaml.safe_load(read_utf8(path, "config file")) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(yaml_error_message(f"config file {path}", exc)) from None
        if not isinstance(data, dict):
            raise ConfigError(f"config file {path}: top level must be a mapping of sections")
    for override in overrides:
        apply_override(data, override)
    cfg = from_dict(cls, data)
    if cls is Config:
        check_config(cfg)
    return cfg


def check_config(cfg: Config) -> None:
    """Raise ConfigError with the first problem found: a type (check_types) or a range or combination
    (config_checks.py); each message names its key and the fix."""
    check_types(cfg)
    errors = config_errors(cfg)
    if errors:
        raise ConfigError(errors[0])
