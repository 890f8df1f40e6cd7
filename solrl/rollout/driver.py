"""Rollouts: the samples an update trains on, and their full-precision rewards. One driver for
every family and every dynamics.

Families (SPEC.md section 2):
- diffusionnft:  K seeds per prompt, full precision (the `old` adapter), full steps.
- naive_scaling: N seeds at full precision, keep the K most contrastive by full reward.
- naive_quant:   N seeds with the explore engine at the full step count (the Sol-RL reference's
                 "direct quantized rollout"), keep K by their rewards, train on those
                 low-precision samples; no regeneration.
- sol_rl:        N seeds with the explore engine -> proxy rewards -> select K -> regenerate
                 those K at full precision from the same noise -> full rewards. A proxy reward
                 is never a training label.

Dynamics (dynamics.py): the ODE gives clean samples (Euler or dpm2, with CFG); an SDE kind gives
each sample's trajectory and per-step log-probs as well (`RolloutBatch.trajectory`), for the
policy-gradient objectives. Exploration always runs the ODE: only the regenerated samples are trained.
"""
from __future__ import annotations

import dataclasses
import time
import typing
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
from scipy import stats

from ..config import RolloutFamily
from ..models.lora import OLD, adapter
from .adaptive import AdaptiveExploration, explore_in_chunks
from .dynamics import ODE, Dynamics
from .generation import SDETrajectory, generate, generate_sde
from .sampling import sampling_grid
from .selection import select_seeds

ROLLOUT_FAMILIES = typing.get_args(RolloutFamily)
ROLLOUT_SEED_BITS = 16  # up to 65,536 samples per iteration get distinct seeds


class RewardError(RuntimeError):
    """The reward model raised; the trainer logs it and skips the iteration."""


def rollout_seeds(run_seed: int, iteration: int, count: int) -> list[int]:
    """Seeds of one iteration: a pure function of (run seed, iteration, index), so resumes repeat them."""
    if count > 1 << ROLLOUT_SEED_BITS:
        raise ValueError(f"{count} samples per iteration exceeds {1 << ROLLOUT_SEED_BITS}")
    base = (run_seed << 40) | (iteration << ROLLOUT_SEED_BITS)
    return [base | j for j in range(count)]


@dataclass
class RolloutSpec:
    """How to draw one iteration's samples; the trainer fills it from the config."""
    family: str = "diffusionnft"
    group_size: int = 12            # K: samples per prompt that are trained on
    explore_seeds: int = 48         # N: seeds explored per prompt (families with selection)
    full_steps: int = 10
    explore_steps: int = 6
    solver: str = "euler"
    guidance: float = 1.0
    batch_size: int = 64
    selection: str = "best_worst"
    autocast: bool = False
    dynamics: Dynamics = ODE        # how full-precision samples are drawn (ode, or an SDE for policy gradients)
    adaptive: AdaptiveExploration | None = None  # sol_rl: explore in chunks up to explore_seeds (adaptive.py); None = all N
    progress: Callable[[str, int, int], None] | None = None  # told (stage, samples done, samples) after each batch

    @property
    def seeds_per_prompt(self) -> int:
        return self.group_size if self.family == "diffusionnft" else self.explore_seeds

    def seeds(self, run_seed: int, iteration: int, groups: int) -> list[int]:
        """The seeds of an iteration's `groups` prompt groups, `seeds_per_prompt` each, group by group."""
        return rollout_seeds(run_seed, iteration, groups * self.seeds_per_prompt)


@dataclass
class RolloutBatch:
    prompts: list[str]              # one per sample
    group_ids: torch.Tensor         # [N] prompt-group index of each sample
    seeds: list[int]
    samples: torch.Tensor           # [N, C, H, W] clean samples x0 (sample space)
    rewards: torch.Tensor           # [N] rewards (full precision except for naive_quant)
    reward_parts: dict[str, torch.Tensor]
    train_timesteps: torch.Tensor   # the rollout grid's T timesteps (t > 0), float
    seconds: dict[str, float] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    proxy_rewards: torch.Tensor | None = None  # [N] explore-stage rewards of the kept seeds (sol_rl), for fidelity plots
    explored: list[int] | None = None          # seeds explored per prompt group (families that explore)
    trajectory: SDETrajectory | None = None    # SDE dynamics: every drawn seed's path and log-probs (rows by seed)
    # where these samples sit in the iteration's whole batch (all ranks): the update's draws depend on it
    sample_offset: int = 0
    global_count: int = 0


@dataclass
class Scored:
    """Samples of one stage (or only their trajectory, or nothing when not kept) and their rewards."""
    samples: torch.Tensor | None
    trajectory: SDETrajectory | None
    scores: torch.Tensor
    parts: dict[str, torch.Tensor]
    generate_seconds: float
    reward_seconds: float          # the reward's score, metric-only parts excluded
    metric_seconds: float = 0.0    # the reward's metric-only parts (RewardResult.metric_seconds)

    @staticmethod
    def cat(pieces: list[Scored]) -> Scored:
        """Several stages' or rounds' results as one: rows one after the other, seconds added up (only without
        trajectories; a part some piece lacks is left out)."""
        samples = None if any(p.samples is None for p in pieces) else torch.cat([p.samples for p in pieces])
        parts = {k: torch.cat([p.parts[k] for p in pieces]) for k in pieces[0].parts if all(k in p.parts for p in pieces)}
        return Scored(samples, None, torch.cat([p.scores for p in pieces]), parts, sum(p.generate_seconds for p in pieces),
                      sum(p.reward_seconds for p in pieces), sum(p.metric_seconds for p in pieces))

    def take(self, idx: torch.Tensor) -> Scored:
        """The selected rows (a trajectory stays whole: rows are found by seed)."""
        samples = self.samples[idx] if self.samples is not None else None
        return Scored(samples, self.trajectory, self.scores[idx], {k: v[idx] for k, v in self.parts.items()},
                      self.generate_seconds, self.reward_seconds, self.metric_seconds)


def _score(reward, policy, samples, prompts):
    try:
        return reward(policy.decode(samples), prompts)
    except Exception as exc:  # any failure inside a reward model is reported the same way
        where = f"prompt {prompts[0]!r}" + (f" and {len(set(prompts)) - 1} other(s)" if len(set(prompts)) > 1 else "")
        raise RewardError(f"reward {getattr(reward, 'name', type(reward).__name__)!r} raised {type(exc).__name__}: {exc} "
                          f"(scoring {len(prompts)} images of {where})") from exc


def score_in_batches(policy, reward, prompts, seeds, spec: RolloutSpec, sample_batch, stage: str = "generate") -> tuple[list, Scored]:
    """Run `sample_batch(prompts, seeds) -> (sample-space images, what to keep)` on batches of
    spec.batch_size and score each batch as soon as it exists; spec.progress hears of each batch as
    `stage`. Returns (kept list, Scored without samples)."""
    device_type = next(policy.transformer.parameters()).device.type
    kept, scores, parts = [], [], {}
    gen_s = reward_s = metric_s = 0.0
    for start in range(0, len(prompts), spec.batch_size):
        p, s = prompts[start:start + spec.batch_size], seeds[start:start + spec.batch_size]
        t0 = time.perf_counter()
        with torch.autocast(device_type, torch.bfloat16, enabled=spec.autocast):
            x, keep = sample_batch(p, s)
        t1 = time.perf_counter()
        result = _score(reward, policy, x, p)
        reward_s += time.perf_counter() - t1 - result.metric_seconds
        metric_s += result.metric_seconds
        gen_s += t1 - t0
        scores.append(result.scores)
        for k, v in result.parts.items():
            parts.setdefault(k, []).append(v)
        if keep is not None:
            kept.append(keep)
        if spec.progress is not None:
            spec.progress(stage, start + len(p), len(prompts))
    # a part missing from some batch (a deferred reward fault, rewards/guard.py) is left out whole
    parts = {k: torch.cat(v) for k, v in parts.items() if len(v) == len(scores)}
    return kept, Scored(None, None, torch.cat(scores), parts, gen_s, reward_s, metric_s)


def draw_and_score(policy, reward, prompts, seeds, steps: int, spec: RolloutSpec, dynamics: Dynamics = ODE,
                   velocity=None, keep: bool = True, stage: str = "generate") -> Scored:
    """Samples under `dynamics`, scored batch by batch. ODE samples are kept only if `keep` (explore
    images are dropped as soon as they are scored); an SDE keeps its trajectories."""
    if dynamics.stochastic:
        def sample_batch(p, s):
            traj = generate_sde(policy, p, s, steps, dynamics, spec.batch_size, velocity)
            return traj.latents[:, -1], traj
    else:
        def sample_batch(p, s):
            x = generate(policy, p, s, steps, spec.solver, spec.guidance, batch_size=spec.batch_size, velocity=velocity).float()
            return x, (x if keep else None)

    kept, scored = score_in_batches(policy, reward, prompts, seeds, spec, sample_batch, stage)
    if dynamics.stochastic:
        scored.trajectory = SDETrajectory.cat(kept)
    elif kept:
        scored.samples = torch.cat(kept)
    return scored


def _select(scores: torch.Tensor, counts: list[int], spec: RolloutSpec, generator, seconds: dict) -> torch.Tensor:
    """Flat indices of the K selected seeds of every group, the groups' `counts` rows one after the other
    (time in seconds["select"]). `generator` is one generator for all groups, or a function group -> generator
    (so a group's draw does not depend on its neighbours)."""
    start = time.perf_counter()
    bad = int((~torch.isfinite(scores)).sum())
    if bad:  # a selection over NaN ranks is meaningless: lose the iteration, say why
        raise RewardError(f"selection needs finite rewards, got {bad} NaN/inf among {scores.numel()}")
    pick = generator if callable(generator) else (lambda g: generator)
    offsets = np.cumsum([0, *counts]).tolist()
    idx = torch.cat([offsets[g] + select_seeds(scores[offsets[g]:offsets[g + 1]], spec.group_size, spec.selection, pick(g))
                     for g in range(len(counts))])
    seconds["select"] = time.perf_counter() - start
    return idx


def _mean_spearman(a: torch.Tensor, b: torch.Tensor, groups: int) -> float:
    values = []
    for x, y in zip(a.reshape(groups, -1).numpy(), b.reshape(groups, -1).numpy()):
        if np.ptp(x) > 0 and np.ptp(y) > 0:
            values.append(stats.spearmanr(x, y).statistic)
    return float(np.mean(values)) if values else float("nan")


def _check_inputs(group_prompts, seeds, spec: RolloutSpec, engine) -> list[str]:
    """One prompt per sample, after checking what the config checks cannot (the call's own arguments)."""
    if spec.family not in ROLLOUT_FAMILIES:
        raise ValueError(f"unknown rollout family {spec.family!r}; choose one of {', '.join(ROLLOUT_FAMILIES)}")
    if spec.family in ("naive_quant", "sol_rl") and engine is None:
        raise ValueError(f"rollout family {spec.family!r} needs an explore engine")
    if spec.family != "diffusionnft" and spec.explore_seeds < spec.group_size:
        raise ValueError(f"rollout.explore_seeds (N={spec.explore_seeds}) must be >= train.group_size (K={spec.group_size})")
    if spec.family == "naive_quant" and spec.dynamics.stochastic:
        raise ValueError("naive_quant trains on explore-engine samples, which have no full-precision SDE trajectory")
    prompts = [p for p in group_prompts for _ in range(spec.seeds_per_prompt)]
    if len(seeds) != len(prompts):
        raise ValueError(f"{len(seeds)} seeds for {len(prompts)} samples")
    return prompts


def run_rollout(policy, reward, group_prompts: list[str], seeds: list[int], spec: RolloutSpec, engine=None,
                generator: torch.Generator | None = None) -> RolloutBatch:
    """One iteration's samples. `seeds` holds N per prompt for families with selection, else K."""
    prompts = _check_inputs(group_prompts, seeds, spec, engine)
    groups = len(group_prompts)
    seconds: dict[str, float] = {}
    metrics: dict[str, float] = {}
    proxy = counts = None  # counts: the seeds explored per prompt group (families that select)
    with adapter(policy.transformer, OLD):
        if spec.family in ("diffusionnft", "naive_scaling"):
            full = draw_and_score(policy, reward, prompts, seeds, spec.full_steps, spec, spec.dynamics)
            seconds["generate_full"], seconds["reward"], seconds["metrics"] = full.generate_seconds, full.reward_seconds, full.metric_seconds
            if spec.family == "naive_scaling":
                counts = [spec.explore_seeds] * groups
                idx = _select(full.scores, counts, spec, generator, seconds)
                full, prompts, seeds = full.take(idx), _take(prompts, idx), _take(seeds, idx)
        else:
            explored, rows, counts = _explore(policy, reward, prompts, seeds, groups, spec, engine)
            seconds["explore"], seconds["reward_explore"] = explored.generate_seconds, explored.reward_seconds
            seconds["metrics_explore"] = explored.metric_seconds
            idx = _select(explored.scores, counts, spec, generator, seconds)
            prompts, seeds = [prompts[rows[i]] for i in idx.tolist()], [seeds[rows[i]] for i in idx.tolist()]
            if spec.family == "naive_quant":
                full = explored.take(idx)
            else:
                full = draw_and_score(policy, reward, prompts, seeds, spec.full_steps, spec, spec.dynamics, stage="regenerate")
                seconds["regenerate"], seconds["reward"], seconds["metrics"] = full.generate_seconds, full.reward_seconds, full.metric_seconds
                proxy = explored.scores[idx]
                metrics.update(proxy_full_spearman=_mean_spearman(proxy, full.scores, groups),
                               proxy_reward_mean=float(explored.scores.mean()), proxy_reward_std=float(explored.scores.std()),
                               selected_proxy_std=float(proxy.std()))
    # generation only; rewards in reward_total; metric-only work (a referee, world-likeness) apart in metrics*
    seconds["rollout"] = sum(v for k, v in seconds.items() if k != "select" and not k.startswith(("reward", "metrics")))
    seconds["reward_total"] = sum(v for k, v in seconds.items() if k.startswith("reward") and k != "reward_total")
    traj = full.trajectory
    samples = full.samples if traj is None else traj.latents[traj.rows(seeds), -1]
    grid = traj.grid if traj is not None else sampling_grid(policy, spec.full_steps)
    group_ids = torch.arange(groups).repeat_interleave(spec.group_size)
    return RolloutBatch(prompts, group_ids, seeds, samples, full.scores, full.parts, grid[:-1].float(), seconds, metrics,
                        proxy, counts, traj)


def _explore(policy, reward, prompts, seeds, groups: int, spec: RolloutSpec, engine) -> tuple[Scored, list[int], list[int]]:
    """The explore stage: every group's N seeds, or with spec.adaptive chunks until contrast (adaptive.py).
    Returns (the explored rows, group by group; each row's index into `seeds`; the seeds explored per group).
    naive_quant (the Sol-RL reference's) runs the low-precision engine at the full step count and keeps its images."""
    keep = spec.family == "naive_quant"
    explored = [0]   # seeds explored in earlier chunks: progress counts the stage whole, up to every group's N

    def explore(rows: list[int]) -> Scored:
        told = spec.progress
        chunk = spec if told is None else dataclasses.replace(spec, progress=lambda s, d, _t: told(s, explored[0] + d, len(seeds)))
        scored = draw_and_score(policy, reward, [prompts[r] for r in rows], [seeds[r] for r in rows],
                                spec.full_steps if keep else spec.explore_steps, chunk, velocity=engine.velocity, keep=keep,
                                stage="explore")
        explored[0] += len(rows)
        return scored

    if spec.adaptive is None:
        rows = list(range(len(seeds)))
        return explore(rows), rows, [spec.explore_seeds] * groups
    rounds, rows, counts = explore_in_chunks(explore, groups, spec.explore_seeds, spec.adaptive)
    order = sorted(range(len(rows)), key=rows.__getitem__)  # group by group, seeds in index order
    return Scored.cat(rounds).take(torch.tensor(order, dtype=torch.long)), [rows[i] for i in order], counts


def _take(items: list, idx: torch.Tensor) -> list:
    return [items[i] for i in idx.tolist()]
