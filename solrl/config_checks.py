"""Every check of a whole configuration across its settings, in one place: ranges and combinations, each
message naming the key and the fix. Types and fixed sets of values are checked while the dataclasses are
built (config.py), which runs these once when a config is loaded (`check_config`), as the Trainer does for
a Config built in code. Pure functions of a `solrl.config.Config`; this module imports nothing of config.py."""
from __future__ import annotations


POLICY_GRADIENT = ("flow_grpo", "flow_grpo_fast", "dance_grpo")  # the on-policy SDE objectives (train.algorithm)


def _range_errors(cfg) -> list[str]:
    t, s, r, e = cfg.train, cfg.sampling, cfg.rollout, cfg.eval
    checks = [
        (t.group_size >= 2, f"train.group_size must be >= 2 (advantages compare images of one prompt); got {t.group_size}"),
        (t.prompts_per_iter >= 1, f"train.prompts_per_iter must be >= 1; got {t.prompts_per_iter}"),
        (t.old_policy_decay is None or 0 <= t.old_policy_decay < 1, f"train.old_policy_decay must be in [0, 1); got {t.old_policy_decay}"),
        (0 < t.timestep_fraction <= 1, f"train.timestep_fraction must be in (0, 1]; got {t.timestep_fraction}"),
        (t.lr > 0, f"train.lr must be > 0; got {t.lr}"),
        (0 <= t.lr_final_ratio <= 1, f"train.lr_final_ratio must be in [0, 1] (a share of train.lr); got {t.lr_final_ratio}"),
        (t.iterations >= 0, f"train.iterations must be >= 0; got {t.iterations}"),
        (t.time_budget_minutes >= 0, f"train.time_budget_minutes must be >= 0 (0 = no limit); got {t.time_budget_minutes}"),
        (t.keep_checkpoints >= 1, f"train.keep_checkpoints must be >= 1 (a run must be resumable); got {t.keep_checkpoints}"),
        (t.micro_batch >= 1, f"train.micro_batch must be >= 1; got {t.micro_batch}"),
        (t.updates_per_iteration >= 1, f"train.updates_per_iteration must be >= 1; got {t.updates_per_iteration}"),
        (t.updates_per_iteration <= t.group_size,
         f"train.updates_per_iteration={t.updates_per_iteration} is more than the {t.group_size} samples of a prompt group "
         "(train.group_size); each update trains a share of every group: lower it or raise train.group_size"),
        (t.old_policy_update_interval >= 1, f"train.old_policy_update_interval must be >= 1; got {t.old_policy_update_interval}"),
        (t.adv_clip_max > 0, f"train.adv_clip_max must be > 0; got {t.adv_clip_max}"),
        (s.steps >= 1, f"sampling.steps must be >= 1; got {s.steps}"),
        (s.batch_size >= 1, f"sampling.batch_size must be >= 1; got {s.batch_size}"),
        (r.explore_steps >= 1, f"rollout.explore_steps must be >= 1; got {r.explore_steps}"),
        (r.family == "diffusionnft" or r.explore_seeds >= t.group_size,
         f"rollout.explore_seeds (N={r.explore_seeds}) must be >= train.group_size (K={t.group_size})"),
        (not r.adaptive or r.family == "sol_rl",
         f"rollout.adaptive=true explores in chunks before regenerating the selected seeds: it needs rollout.family=sol_rl "
         f"(got {r.family}); set rollout.adaptive=false for {r.family}"),
        (not r.adaptive or r.adaptive_chunk == 0 or t.group_size <= r.adaptive_chunk <= r.explore_seeds,
         f"rollout.adaptive_chunk must be 0 (= 2K, at most N) or between train.group_size (K={t.group_size}) and rollout.explore_seeds "
         f"(N={r.explore_seeds}): K of the explored seeds are selected; got {r.adaptive_chunk}"),
        (r.adaptive_min_spread >= 0, f"rollout.adaptive_min_spread must be >= 0; got {r.adaptive_min_spread}"),
        (e.seeds_per_prompt >= 1 and e.steps >= 1,
         f"eval.seeds_per_prompt and eval.steps must be >= 1; got {e.seeds_per_prompt} and {e.steps}"),
        (0 <= e.ema_decay < 1, f"eval.ema_decay must be in [0, 1); got {e.ema_decay}"),
        (cfg.lora.rank >= 1, f"lora.rank must be >= 1; got {cfg.lora.rank}"),
        (cfg.reward.timeout_seconds >= 0, f"reward.timeout_seconds must be >= 0 (0 = no limit); got {cfg.reward.timeout_seconds}"),
        (cfg.model.compile in ("eager", "auto") or t.parallel != "fsdp2",
         "model.compile with train.parallel=fsdp2 is not supported yet; set model.compile=auto or eager (rollout.compile works)"),
    ]
    return [message for ok, message in checks if not ok]


def _clean_sample_errors(cfg) -> list[str]:
    """nft and awm: each update needs at least one of the timestep slots a sample trains."""
    t, errors = cfg.train, []
    if t.algorithm == "nft" and not t.nft.beta > 0:
        errors.append(f"train.nft.beta must be > 0; got {t.nft.beta}")
    if t.algorithm == "awm" and (t.awm.old_kl_coef < 0 or t.awm.ref_kl_coef < 0):
        errors.append("train.awm.old_kl_coef and train.awm.ref_kl_coef must be >= 0")
    return errors


def _policy_gradient_errors(cfg) -> list[str]:
    """What the on-policy SDE objectives cannot be combined with."""
    t, algorithm, steps, errors = cfg.train, cfg.train.algorithm, cfg.sampling.steps, []
    if cfg.rollout.family == "naive_quant":
        errors.append(f"train.algorithm={algorithm} needs the SDE trajectory and log-probs of the samples it trains on; "
                      "rollout.family=naive_quant trains on explore-engine samples, which have none. Use sol_rl "
                      "(regenerates the selected seeds with the SDE sampler), naive_scaling or diffusionnft, or "
                      "train.algorithm=awm / nft, which need clean samples only")
    if cfg.sampling.solver != "euler":
        errors.append(f"train.algorithm={algorithm} samples with an Euler-Maruyama SDE (Euler on its ODE steps); "
                      f"set sampling.solver=euler (got {cfg.sampling.solver!r})")
    if cfg.sampling.guidance != 1.0:
        errors.append(f"train.algorithm={algorithm} recomputes log-probs without CFG; set sampling.guidance=1.0 "
                      f"(got {cfg.sampling.guidance})")
    on_policy = t.old_policy_decay == 0 or (t.old_policy_decay is None and t.old_policy_decay_schedule == "copy")
    if not on_policy or t.old_policy_update_interval != 1:
        errors.append(f"train.algorithm={algorithm} is on-policy: the rollout adapter must equal the trained one at "
                      "every rollout, so set train.old_policy_decay_schedule=copy (no fixed train.old_policy_decay) "
                      "and train.old_policy_update_interval=1")
    g = t.grpo
    if not g.clip_range > 0:
        errors.append(f"train.grpo.clip_range must be > 0; got {g.clip_range}")
    if algorithm == "dance_grpo":
        if not t.dance.eta > 0:
            errors.append(f"train.dance.eta must be > 0; got {t.dance.eta}")
        if not 0 < t.dance.timestep_fraction <= 1:
            errors.append(f"train.dance.timestep_fraction must be in (0, 1]; got {t.dance.timestep_fraction}")
        return errors
    if g.kl_coef < 0:
        errors.append(f"train.grpo.kl_coef must be >= 0; got {g.kl_coef}")
    if not 0 < g.timestep_fraction <= 1:
        errors.append(f"train.grpo.timestep_fraction must be in (0, 1]; got {g.timestep_fraction}")
    if g.sde_type == "cps" and not (0 < g.noise_level <= 1 and steps >= 2):
        errors.append("train.grpo.sde_type=cps needs 0 < train.grpo.noise_level <= 1 and sampling.steps >= 2 "
                      "(its last step lands on t = 0 deterministically and is not trained)")
    if g.sde_type == "sde" and not g.noise_level > 0:
        errors.append(f"train.grpo.noise_level must be > 0; got {g.noise_level}")
    if algorithm == "flow_grpo_fast" and not 1 <= g.window_size <= max(1, steps // 2):
        errors.append(f"train.grpo.window_size must be in [1, sampling.steps // 2 = {max(1, steps // 2)}] "
                      f"(the window starts in the first half); got {g.window_size}")
    return errors


def config_errors(cfg) -> list[str]:
    errors = _range_errors(cfg)
    errors += _policy_gradient_errors(cfg) if cfg.train.algorithm in POLICY_GRADIENT else _clean_sample_errors(cfg)
    return errors
