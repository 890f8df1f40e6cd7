"""What several verbs share: the log's format, the model and sampling options, and the prompts / policy / reward
they name."""
from __future__ import annotations

import argparse
import logging


def configure_logging(level: int, prefix: str = "") -> None:
    """The verb's log on stderr. torchao announces at import (through peft, on every run) that it found no Triton:
    true of every CPU build of torch and about GPU kernels only, so on a machine without CUDA it is not shown."""
    import torch

    logging.basicConfig(level=level, format=f"%(asctime)s {prefix}%(name)s %(levelname)s %(message)s")
    if not torch.cuda.is_available():
        logging.getLogger("torchao.kernel.intmm").setLevel(logging.ERROR)


def model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="toy", help="model family (default: toy)")
    p.add_argument("--model-path", default=None, help="checkpoint directory; default: the shipped toy base model")
    p.add_argument("--shift", type=float, default=None, help="timestep shift; default: the model's own")


def sampling_args(p: argparse.ArgumentParser, steps: int = 10) -> None:
    p.add_argument("--steps", type=int, default=steps, help=f"ODE steps (default {steps})")
    p.add_argument("--solver", default="euler", choices=["euler", "dpm2"], help="deterministic ODE solver")
    p.add_argument("--guidance", type=float, default=1.0, help="CFG scale; 1.0 = CFG-free (default)")
    p.add_argument("--batch-size", type=int, default=64, help="images per forward pass")


def prompts_policy_reward(args):
    """The prompt set, policy and reward named by --prompts/--max-prompts, --model*, --reward; the policy's
    weights ("live" / "ema") go into args.weights_used for a run, None otherwise."""
    from ..data import load_prompts
    from ..models import load_policy
    from ..rewards import build_reward

    prompts = load_prompts(args.prompts)
    if args.max_prompts:
        prompts = prompts[: args.max_prompts]
    args.weights_used = None
    if getattr(args, "run", None):  # a training run's trained LoRA on the base it was trained from
        from ..models import evaluated_weights, load_trained_policy
        from ..training.checkpoint import load_checkpoint

        ckpt = load_checkpoint(args.run)
        args.reward = args.reward or ckpt["config"]["reward"]["name"]   # score as the run scored itself
        # by default the weights the trainer evaluated: its EMA of the LoRA under eval.ema, else the LoRA itself
        args.weights_used = evaluated_weights(ckpt) if getattr(args, "weights", "auto") == "auto" else args.weights
        policy = load_trained_policy(ckpt, args.weights_used)[0]
    else:
        policy = load_policy(args.model, args.model_path, args.shift)
    args.reward = args.reward or "geneval_gold"   # the toy presets' reward
    return prompts, policy, build_reward(args.reward)
