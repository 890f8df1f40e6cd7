"""The GPU presets against the Sol-RL reference (NVlabs/Sana `train_scripts/sol_rl/`, `configs/sol_rl/`):
prompt encoding, the VAE's dtype and the explore engine's quantized layers at the released sizes."""
import inspect
from pathlib import Path

import pytest
import torch

from solrl.config import load_config
from solrl.models import load_policy

CONFIGS = Path(__file__).resolve().parent.parent / "configs"
T5_PRESETS = sorted(p for p in CONFIGS.glob("*.yaml") if p.stem.split("_")[0] in ("sd35l", "flux1"))
SANA_PRESETS = sorted(CONFIGS.glob("sana_*.yaml"))
PROMPTS = ["a red cat", "two blue squares on a long table"]


def _header(path: Path) -> str:
    return "\n".join(line for line in path.read_text().splitlines() if line.startswith("#"))


@pytest.mark.parametrize("path", T5_PRESETS, ids=lambda p: p.stem)
def test_sd35l_and_flux1_presets_encode_prompts_at_the_references_128_tokens(path):
    """TEXT_ENCODER_MAX_SEQ_LEN = 128 in train_sd3.py and train_flux1.py; longer prompts are cut, as there."""
    cfg = load_config(path)
    assert cfg.model.options["max_sequence_length"] == 128
    assert cfg.model.options["truncate_prompts"] is True
    assert "128" in _header(path)


@pytest.mark.parametrize("path", SANA_PRESETS, ids=lambda p: p.stem)
def test_sana_presets_encode_the_prompt_alone(path):
    cfg = load_config(path)
    assert "complex_human_instruction" not in cfg.model.options
    assert "instruction" in _header(path)


def test_sana_encodes_as_encode_prompt_without_the_instruction_unless_asked(pipeline_dirs):
    from diffusers import SanaPipeline

    path = str(pipeline_dirs("sana"))
    policy = load_policy("sana", path, resolution=32, options={"max_sequence_length": 48})
    states, mask, _, _ = policy.pipe.encode_prompt(PROMPTS[1], do_classifier_free_guidance=False, max_sequence_length=48)
    ours = policy.encode_prompts([PROMPTS[1]])
    assert torch.equal(ours.states, states) and torch.equal(ours.mask, mask)

    asked = load_policy("sana", path, resolution=32, options={"max_sequence_length": 48, "complex_human_instruction": True})
    instruction = asked.instruction
    assert instruction == inspect.signature(SanaPipeline.__call__).parameters["complex_human_instruction"].default
    assert len(instruction) > 1  # the pipeline's own default, several lines
    with_instruction, mask2, _, _ = asked.pipe.encode_prompt(PROMPTS[1], do_classifier_free_guidance=False,
                                                             max_sequence_length=48, complex_human_instruction=instruction)
    theirs = asked.encode_prompts([PROMPTS[1]])
    assert torch.equal(theirs.states, with_instruction) and torch.equal(theirs.mask, mask2)
    assert theirs.states.shape != ours.states.shape or not torch.equal(theirs.states, ours.states)


@pytest.mark.parametrize("family, vae_dtype", [("sd3", torch.float32), ("flux", torch.float32), ("sana", torch.bfloat16)])
def test_the_vae_decodes_in_the_references_dtype(family, vae_dtype, pipeline_dirs):
    """SD3 and FLUX.1: float32 VAE on a bf16 model (train_sd3.py, train_flux1.py); SANA: the model's bf16."""
    policy = load_policy(family, str(pipeline_dirs(family)), resolution=32, dtype="bfloat16", options={"max_sequence_length": 48})
    assert policy.pipe.vae.dtype == vae_dtype and policy.transformer.dtype == torch.bfloat16
    images = policy.decode(torch.randn(1, *policy.sample_shape))
    assert images.dtype == torch.float32 and images.shape == (1, 3, 32, 32)


def test_truncating_policies_skip_the_prompt_length_check(pipeline_dirs):
    from solrl.data.prompts import check_prompt_lengths

    path, long = str(pipeline_dirs("sd3")), ["a " * 60 + "cat"]
    strict = load_policy("sd3", path, resolution=32, options={"max_sequence_length": 48})
    with pytest.raises(ValueError, match="exceed the text encoder's limit of 48 tokens"):
        check_prompt_lengths(strict, long, "prompts.txt")
    cutting = load_policy("sd3", path, resolution=32, options={"max_sequence_length": 48, "truncate_prompts": True})
    check_prompt_lengths(cutting, long, "prompts.txt")
    assert cutting.encode_prompts(long).states.shape[1] == strict.encode_prompts(PROMPTS[:1]).states.shape[1]


def test_flux_explores_the_references_495_linears_at_the_released_size():
    """train_flux1.py's skip list (x_embedder, context_embedder, time_text_embed, norm_out; min_dim 1000) on
    FLUX.1-dev, counted on the meta device: 495 of 504 linears, its AdaLN linears and proj_out among them."""
    import diffusers

    from solrl.models.diffusers_families import FluxPolicy
    from solrl.models.released import FLUX1_DEV
    from solrl.precision.engine import layer_rule, plan_layers
    from solrl.precision.recipes import RECIPES

    with torch.device("meta"):
        transformer = getattr(diffusers, FLUX1_DEV.transformer_class)(**FLUX1_DEV.transformer)
    quantized, kept = plan_layers(transformer, layer_rule(FluxPolicy, RECIPES["nvfp4"], "reference", transformer))
    assert (len(quantized), len(kept)) == (495, 9)
    assert sorted(kept) == sorted(["x_embedder", "context_embedder", "norm_out.linear"] + [
        f"time_text_embed.{e}.linear_{i}" for e in ("timestep_embedder", "guidance_embedder", "text_embedder") for i in (1, 2)])
    adaln = [n for n in quantized if n.endswith(("norm1.linear", "norm1_context.linear", "norm.linear"))]
    assert len(adaln) == 19 * 2 + 38 and "proj_out" in quantized
