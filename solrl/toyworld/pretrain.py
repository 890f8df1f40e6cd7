"""Pretrain the toy base model by rectified flow on rendered toy-world scenes (train split only),
in pixel space or, given a trained toy autoencoder, on its latents (saved beside the transformer)."""
from __future__ import annotations

import copy
import datetime
import json
import math
import platform
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from ..models.text_encoder import TEXT_SETTINGS, MiniLMEncoder, text_settings
from ..models.toy import ToyPolicy, build_toy_transformer
from ..models.toy_autoencoder import AUTOENCODER_DIR, ToyAutoencoder
from .grammar import RELATIONS, parse_prompt, split_prompts
from .render import render_scene


@dataclass
class PretrainConfig:
    out: str = "runs/pretrain_toy"
    steps: int = 2000
    batch_size: int = 32
    lr: float = 1e-3
    warmup_steps: int = 100
    weight_decay: float = 0.0
    cond_dropout: float = 0.1  # share of empty-prompt samples, so CFG works at sampling time
    ema_decay: float = 0.998   # the saved weights are this exponential moving average (cleaner samples)
    snapshot_every: int = 250
    seed: int = 0
    sampling_shift: float = 1.0
    init: str | None = None    # start (weights and their average) from this model directory instead of random weights
    autoencoder: str | None = None  # a trained toy autoencoder directory: pretrain on its latents
    timestep_sampling: str = "logit_normal"  # or "uniform": logit-normal rarely draws t > 0.9, where the layout is decided
    text_position_scale: float | None = None  # position code added to the token states (text_encoder.py); None: init's, or 0
    text_causal: bool | None = None  # MiniLM under a causal mask (text_encoder.py); None: init's, or False
    text_word_scale: float | None = None  # input word embeddings added to the token states; None: init's, or 0
    # relation scenes trained on; a curriculum can start with "left of" and "above" alone, where the first object
    # always goes left or up: which object goes where is then readable from word order alone
    relations: tuple[str, ...] = RELATIONS
    # weight of the prompt-mean loss (`prompt_mean_loss`) beside the flow-matching loss; 0: off
    mean_weight: float = 0.0
    mean_renders: int = 32     # renders averaged into each prompt's mean latent


def _lr_factor(step: int, cfg: PretrainConfig) -> float:
    if step < cfg.warmup_steps:
        return (step + 1) / cfg.warmup_steps
    progress = (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps)
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress))


def sample_timesteps(kind: str, n: int) -> torch.Tensor:
    """Training times in (0, 1): SD3's logit-normal(0, 1), or uniform."""
    if kind == "logit_normal":
        return torch.sigmoid(torch.randn(n))
    if kind == "uniform":
        return torch.rand(n)
    raise ValueError(f"timestep sampling {kind!r}: use 'logit_normal' or 'uniform'")


def flow_matching_loss(policy: ToyPolicy, x0: torch.Tensor, t: torch.Tensor, eps: torch.Tensor, cond) -> torch.Tensor:
    """Per-sample rectified-flow loss: x_t = (1 - t) x0 + t eps, target velocity eps - x0."""
    tt = t[:, None, None, None]
    return (policy.velocity((1 - tt) * x0 + tt * eps, t, cond) - (eps - x0)).pow(2).mean(dim=(1, 2, 3))


def prompt_mean_loss(policy: ToyPolicy, means: torch.Tensor, eps: torch.Tensor, cond) -> torch.Tensor:
    """Rectified-flow loss at t = 1 against each prompt's mean clean latent instead of one render.

    At t = 1 the input is pure noise and the loss-minimising velocity is eps - E[x0 | prompt], so this
    has the flow-matching loss's optimum there, without the per-render variance (about 0.87 per
    dimension) that buries the relation's share of the signal (about 0.03): sampled renders alone left
    the shipped base blind to the relation (docs/history.md, 2026-12-02)."""
    t = torch.ones(eps.shape[0])
    return (policy.velocity(eps, t, cond) - (eps - means)).pow(2).mean(dim=(1, 2, 3))


@torch.no_grad()
def prompt_means(policy: ToyPolicy, scenes, renders: int, rng: np.random.Generator) -> torch.Tensor:
    """Each scene's mean clean latent (in the model's sample space) over `renders` renders."""
    return torch.stack([policy.encode(np.stack([render_scene(s, rng) for _ in range(renders)])).mean(0) for s in scenes])


def training_prompts(relations=RELATIONS) -> list[str]:
    """The train split's count prompts and those of its relation prompts whose relation is listed."""
    unknown = set(relations) - set(RELATIONS)
    if unknown or not relations:
        raise ValueError(f"relations {sorted(unknown) or '(none)'}: name one or more of {list(RELATIONS)}")
    return [p for p in split_prompts("train") if parse_prompt(p).relation in (None, *relations)]


def _initial_transformer(cfg: PretrainConfig, autoencoder: ToyAutoencoder | None):
    if cfg.init is None:
        return build_toy_transformer(cfg.seed, autoencoder.latent_shape if autoencoder is not None else None)
    from diffusers import SD3Transformer2DModel

    if not (Path(cfg.init) / "config.json").exists():
        raise FileNotFoundError(f"--init {cfg.init}: no toy model there (config.json missing); point it at a directory "
                                "written by `solrl pretrain-toy`, e.g. solrl/assets/toy_base")
    return SD3Transformer2DModel.from_pretrained(cfg.init)


def pretrain_toy(cfg: PretrainConfig, log=print) -> Path:
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    prompts = training_prompts(cfg.relations)
    scenes = [parse_prompt(p) for p in prompts]
    info_file = Path(cfg.init or "", "training.json")
    inherited = text_settings(json.loads(info_file.read_text()) if cfg.init and info_file.exists() else {})
    for name, value in inherited.items():  # a switch left unset follows the --init model's
        if getattr(cfg, f"text_{name}") is None:
            setattr(cfg, f"text_{name}", value)
    encoder = MiniLMEncoder(**{name: getattr(cfg, f"text_{name}") for name in inherited})
    embeds = encoder(prompts)
    null = encoder([""])
    if cfg.autoencoder is None and cfg.init and (Path(cfg.init) / AUTOENCODER_DIR).exists():
        cfg.autoencoder = str(Path(cfg.init) / AUTOENCODER_DIR)   # continuing a latent model: its own autoencoder
    autoencoder = ToyAutoencoder.load(cfg.autoencoder) if cfg.autoencoder else None
    transformer = _initial_transformer(cfg, autoencoder).train()
    ema = copy.deepcopy(transformer).eval().requires_grad_(False)
    policy = ToyPolicy(transformer, encoder, autoencoder=autoencoder)
    opt = torch.optim.AdamW(transformer.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: _lr_factor(s, cfg))
    # its own generator, so that runs without the prompt-mean loss draw the same batches as before it
    means = prompt_means(policy, scenes, cfg.mean_renders, np.random.default_rng([cfg.seed, 1])) if cfg.mean_weight else None
    start, losses = time.time(), []
    with open(out / "pretrain_log.jsonl", "w") as logf:
        for step in range(cfg.steps):
            idx = rng.integers(0, len(prompts), cfg.batch_size)
            x0 = policy.encode(np.stack([render_scene(scenes[i], rng) for i in idx]))
            cond = embeds.index(torch.as_tensor(idx))
            drop = torch.as_tensor(rng.random(cfg.batch_size) < cfg.cond_dropout)
            cond.states = torch.where(drop[:, None, None], null.states, cond.states)
            cond.pooled = torch.where(drop[:, None], null.pooled, cond.pooled)
            eps = torch.randn_like(x0)
            t = sample_timesteps(cfg.timestep_sampling, cfg.batch_size)
            loss = flow_matching_loss(policy, x0, t, eps, cond).mean()
            if means is not None:  # the same prompts, fresh noise (a dropped prompt's mean would be the unconditional one)
                kept = torch.as_tensor(idx)[~drop]
                loss = loss + cfg.mean_weight * prompt_mean_loss(policy, means[kept], torch.randn_like(x0)[~drop],
                                                                 embeds.index(kept)).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(transformer.parameters(), 1.0)
            opt.step()
            sched.step()
            with torch.no_grad():
                # warm-up of the average: early weights are forgotten quickly
                decay = min(cfg.ema_decay, (1 + step) / (10 + step))
                for p_ema, p in zip(ema.parameters(), transformer.parameters()):
                    p_ema.lerp_(p, 1 - decay)
            losses.append(loss.item())
            if (step + 1) % 50 == 0:
                rec = {"step": step + 1, "loss": float(np.mean(losses[-50:])), "seconds": round(time.time() - start, 1)}
                logf.write(json.dumps(rec) + "\n")
                logf.flush()
                log(f"pretrain step {rec['step']}/{cfg.steps} loss {rec['loss']:.4f} ({rec['seconds']} s)")
            if cfg.snapshot_every and (step + 1) % cfg.snapshot_every == 0 and step + 1 < cfg.steps:
                _save(ema, out / "snapshots" / f"step_{step + 1:06d}", cfg, step + 1, start, losses)
    _save(ema, out, cfg, cfg.steps, start, losses)
    return out


def _copy_autoencoder(cfg: PretrainConfig, path: Path) -> None:
    if cfg.autoencoder and Path(cfg.autoencoder).resolve() != (path / AUTOENCODER_DIR).resolve():
        shutil.copytree(cfg.autoencoder, path / AUTOENCODER_DIR, dirs_exist_ok=True)


def _save(transformer, path: Path, cfg: PretrainConfig, step: int, start: float, losses: list[float]) -> None:
    transformer.save_pretrained(str(path), safe_serialization=True)
    _copy_autoencoder(cfg, path)
    info = {
        "what": "toy-world base model (solrl pretrain-toy): rectified flow on rendered train-split scenes; EMA weights",
        "step": step,
        "final_loss_mean_last_50": float(np.mean(losses[-50:])),
        "seconds": round(time.time() - start, 1),
        "sampling_shift": cfg.sampling_shift,
        **{f"text_{name}": getattr(cfg, f"text_{name}") for name in TEXT_SETTINGS},
        "config": asdict(cfg),
        "torch": torch.__version__,
        "machine": f"{platform.machine()} {platform.processor() or ''} {torch.get_num_threads()} threads".strip(),
        "date": datetime.date.today().isoformat(),
    }
    (path / "training.json").write_text(json.dumps(info, indent=2) + "\n")
