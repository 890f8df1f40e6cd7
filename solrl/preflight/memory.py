"""Peak GPU memory of a training run, estimated from its shape before anything is loaded.

Static: the transformer's weights, the LoRA adapters (the trained one in fp32 with its gradient and two
AdamW moments; the old one; the evaluation EMA), the explore engine's copy, the text encoders and VAE
unless offloaded, and the reward model where it runs on the GPU (the shipped scorers load in fp32). On
top, whichever is largest: the training micro-batch's activations, one rollout forward's, or offloaded
encoders visiting the device. Apart from those, the explore engine's build is a peak of its own: the
engine deep-copies the whole policy transformer (its adapters too) and makes each replacement layer
while the copy is still whole, so for a moment the copy and the engine stand side by side (an upper
bound: the LoRA layers' replacements, made first, free their originals before the rest are made).

The activation factors are calibrated, not derived: one H200 measurement (SD3.5-Medium size, 1024 px, a
LoRA training step at micro-batch 4, eager, no gradient checkpointing: 58.6 GiB peak) puts a block's saved
activations at about 44 values of the activation dtype per token and hidden unit. gpu_check records the
measured peak of every GPU preset beside this estimate, to correct it.

Why naive_scaling measured 2x this estimate on the H200 (2026-12-04: 25.7 GiB estimated, 44.4 and 49.3
measured): it ran second in its process, after another trainer, and a module compiled with
`Module.compile` holds itself through its compiled call (module -> compiled function -> bound method ->
module), so the earlier trainer's compiled blocks, nearly all of its weights, outlived `del trainer`
until Python's cycle collector ran (tests/test_preflight.py shows the cycle on the CPU). The bench now
collects before each run and records what it found allocated; a training run holds one trainer per
process, so the estimate stands for it. The same H200 run's sol_rl peak (41.3 GiB measured, first in
its process) matches the engine build, not the training step: see `build_peak`.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

GIB = 2**30
TRAIN_VALUES_PER_TOKEN = 44    # saved per block and token, in units of `hidden` activation values (calibrated above)
CHECKPOINT_VALUES_PER_TOKEN = 2  # with gradient checkpointing a block keeps only its inputs (image and text streams)
INFER_VALUES_PER_TOKEN = 10    # one block's transient working set in a no-grad forward (residual, q/k/v, MLP hidden)
LORA_TRAINED_BYTES = 16        # fp32 weight + gradient + two AdamW moments, per trainable parameter
LORA_COPY_BYTES = 4            # fp32, per parameter of the old adapter and of the EMA
FIT_SHARE = 0.92               # a run "fits" below this share of the device's memory (the allocator's slack)
TRANSIENT = ("training activations (micro-batch)", "rollout activations (one forward)", "offloaded encoders while visiting")
BUILD = "explore engine build (transient)"


@dataclass(frozen=True)
class RunShape:
    transformer_params: int
    weight_bytes: int              # per transformer parameter (2: bf16)
    lora_params: int               # parameters of one adapter
    lora_copies: int               # adapters kept beside the trained one: old (+ the evaluation EMA)
    explore_bytes: float           # the explore engine's copy of the transformer (0: no engine)
    encoder_params: float          # text encoders + VAE kept on the device
    visiting_params: float         # ... or offloaded: on the device only while they encode or decode
    tokens: int                    # per sample: image tokens + text tokens
    hidden: int                    # the transformer's width
    blocks: int                    # its transformer blocks (joint and single)
    micro_batch: int
    rollout_batch: int
    checkpointing: bool
    activation_bytes: int          # 2 under bf16 (autocast or a bf16 model), 4 in fp32
    reward_bytes: float = 0.0      # the reward model's weights on the device (0: none, on the CPU, or remote)


@dataclass(frozen=True)
class MemoryEstimate:
    parts: dict[str, float]        # GiB per part
    peak_gib: float
    peak_at: str = ""              # the moment of the peak: the engine's build, or the largest transient

    def lines(self, device_gib: float | None) -> list[str]:
        rows = [f"{name:<36} {gib:8.1f} GiB" for name, gib in self.parts.items() if gib or name != BUILD]
        rows.append(f"{'estimated peak':<36} {self.peak_gib:8.1f} GiB" + (f" ({self.peak_at})" if self.peak_at else ""))
        if device_gib:
            verdict = "fits" if fits(self, device_gib) else "DOES NOT FIT"
            rows.append(f"{'device memory':<36} {device_gib:8.1f} GiB: {verdict} (an estimate: keep 8% for the allocator)")
        return rows


def fits(estimate: MemoryEstimate, device_gib: float) -> bool:
    return estimate.peak_gib <= FIT_SHARE * device_gib


def memory_problem(peak_gib: float, device_gib: float) -> str:
    return (f"estimated peak memory {peak_gib:.0f} GiB exceeds {device_gib:.0f} GiB (less 8% for the allocator): lower "
            "train.micro_batch or sampling.batch_size, set model.gradient_checkpointing=true (or auto) or model.offload=true")


def estimate_memory(shape: RunShape) -> MemoryEstimate:
    s = shape
    per_block = s.tokens * s.hidden * s.activation_bytes   # one activation tensor of one sample in one block
    saved = CHECKPOINT_VALUES_PER_TOKEN * s.blocks + TRAIN_VALUES_PER_TOKEN if s.checkpointing else TRAIN_VALUES_PER_TOKEN * s.blocks
    parts = {
        "transformer weights": s.transformer_params * s.weight_bytes,
        "LoRA (trained + optimizer, old, EMA)": s.lora_params * (LORA_TRAINED_BYTES + LORA_COPY_BYTES * s.lora_copies),
        "explore engine copy": s.explore_bytes,
        "text encoders + VAE": s.encoder_params * s.weight_bytes,
        "reward model": s.reward_bytes,
        "training activations (micro-batch)": saved * per_block * s.micro_batch,
        "rollout activations (one forward)": INFER_VALUES_PER_TOKEN * per_block * s.rollout_batch,
        "offloaded encoders while visiting": s.visiting_params * s.weight_bytes,
        BUILD: build_extra(s),
    }
    parts = {k: v / GIB for k, v in parts.items()}
    static = sum(v for k, v in parts.items() if k not in (*TRANSIENT, BUILD))
    largest = max(TRANSIENT, key=parts.get)
    running, build = static + parts[largest], build_peak(s) / GIB
    if build > running:
        return MemoryEstimate(parts, build, "while the explore engine is built: the copy and the engine side by side")
    moment = {TRANSIENT[0]: "during a training micro-batch", TRANSIENT[1]: "during a rollout forward",
              TRANSIENT[2]: "while the offloaded encoders visit"}[largest]
    return MemoryEstimate(parts, running, moment)


def build_extra(s: RunShape) -> float:
    """Bytes the engine's build adds for a moment: the deep copy of the transformer (the trained and old
    adapters with it, fp32) while the engine's layers are made (0 without an engine)."""
    if not s.explore_bytes:
        return 0.0
    return s.transformer_params * s.weight_bytes + 2 * s.lora_params * LORA_COPY_BYTES


def build_peak(s: RunShape) -> float:
    """Bytes on the device while the engine is built: what the trainer loaded before it (reward, model, encoders,
    the trained and old adapters; no optimizer state or EMA yet), the copy and the engine."""
    if not s.explore_bytes:
        return 0.0
    before = (s.reward_bytes + s.transformer_params * s.weight_bytes + s.encoder_params * s.weight_bytes
              + 2 * s.lora_params * LORA_COPY_BYTES)
    return before + build_extra(s) + s.explore_bytes


def choose_checkpointing(shape: RunShape, device_gib: float | None) -> tuple[bool, MemoryEstimate, MemoryEstimate]:
    """`model.gradient_checkpointing: auto`: (on?, the estimate without, the estimate with). On only where the
    step would not fit the device without it; off where nothing is known of the device's memory (a CPU)."""
    without = estimate_memory(replace(shape, checkpointing=False))
    with_it = estimate_memory(replace(shape, checkpointing=True))
    return bool(device_gib) and not fits(without, device_gib), without, with_it
