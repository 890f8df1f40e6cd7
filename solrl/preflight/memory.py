"""Peak GPU memory of a training run, estimated from its shape before anything is loaded.

Static: the transformer's weights, the LoRA adapters (the trained one in fp32 with its gradient and two
AdamW moments; the old one; the evaluation EMA), the explore engine's copy, and the text encoders and VAE
unless offloaded. On top, whichever is largest: the training micro-batch's activations, one rollout
forward's, or offloaded encoders visiting the device. The activation factors are calibrated, not derived: one H200 measurement (SD3.5-Medium
size, 1024 px, a LoRA training step at micro-batch 4, eager, no gradient checkpointing: 58.6 GiB peak)
puts a block's saved activations at about 44 values of the activation dtype per token and hidden unit.
gpu_check records the measured peak of every GPU preset beside this estimate, to correct it.
"""
from __future__ import annotations

from dataclasses import dataclass

GIB = 2**30
TRAIN_VALUES_PER_TOKEN = 44    # saved per block and token, in units of `hidden` activation values (calibrated above)
CHECKPOINT_VALUES_PER_TOKEN = 2  # with gradient checkpointing a block keeps only its inputs (image and text streams)
INFER_VALUES_PER_TOKEN = 10    # one block's transient working set in a no-grad forward (residual, q/k/v, MLP hidden)
LORA_TRAINED_BYTES = 16        # fp32 weight + gradient + two AdamW moments, per trainable parameter
LORA_COPY_BYTES = 4            # fp32, per parameter of the old adapter and of the EMA


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


@dataclass(frozen=True)
class MemoryEstimate:
    parts: dict[str, float]        # GiB per part
    peak_gib: float

    def lines(self, device_gib: float | None) -> list[str]:
        rows = [f"{name:<34} {gib:8.1f} GiB" for name, gib in self.parts.items()]
        rows.append(f"{'estimated peak':<34} {self.peak_gib:8.1f} GiB")
        if device_gib:
            verdict = "fits" if self.peak_gib <= 0.92 * device_gib else "DOES NOT FIT"
            rows.append(f"{'device memory':<34} {device_gib:8.1f} GiB: {verdict} (an estimate: keep 8% for the allocator)")
        return rows


def estimate_memory(shape: RunShape) -> MemoryEstimate:
    s = shape
    per_block = s.tokens * s.hidden * s.activation_bytes   # one activation tensor of one sample in one block
    saved = CHECKPOINT_VALUES_PER_TOKEN * s.blocks + TRAIN_VALUES_PER_TOKEN if s.checkpointing else TRAIN_VALUES_PER_TOKEN * s.blocks
    parts = {
        "transformer weights": s.transformer_params * s.weight_bytes,
        "LoRA (trained + optimizer, old, EMA)": s.lora_params * (LORA_TRAINED_BYTES + LORA_COPY_BYTES * s.lora_copies),
        "explore engine copy": s.explore_bytes,
        "text encoders + VAE": s.encoder_params * s.weight_bytes,
        "training activations (micro-batch)": saved * per_block * s.micro_batch,
        "rollout activations (one forward)": INFER_VALUES_PER_TOKEN * per_block * s.rollout_batch,
        "offloaded encoders while visiting": s.visiting_params * s.weight_bytes,
    }
    parts = {k: v / GIB for k, v in parts.items()}
    transient = ("training activations (micro-batch)", "rollout activations (one forward)", "offloaded encoders while visiting")
    static = sum(v for k, v in parts.items() if k not in transient)
    peak = static + max(parts[k] for k in transient)
    return MemoryEstimate(parts, peak)
