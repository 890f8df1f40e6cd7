"""The four diffusers families on tiny random-weight pipelines built here (no download):
solrl's sampler agrees with each pipeline's own loop, one sol_rl iteration trains end to end,
and the exported LoRA loads into the pipeline with diffusers' loader and reproduces the policy."""
import math
import re

import pytest
import torch

from solrl.config import load_config
from solrl.models import load_policy
from solrl.models.diffusers_t2i import pack_2x2, schedule_shift, unpack_2x2
from solrl.models.lora import TRAINED, adapter
from solrl.models.lora_export import LOAD_ROUTES, check_export, export_lora
from solrl.rewards.base import REWARDS, Reward, RewardResult
from solrl.rollout.generation import generate
from solrl.seeding import initial_noise
from solrl.training.trainer import Trainer

RESOLUTION = {"sd3": 32, "flux": 32, "sana": 32, "qwen_image": 32}
EXPLORE = {"sd3": "int8", "flux": "nvfp4", "sana": "nvfp4", "qwen_image": "int8"}
OPTIONS = {"max_sequence_length": 48}  # above the tiny tokenizers' counts of PROMPTS (they split finely)
PROMPTS = ["a red cat", "two blue squares on a long table"]
FAMILIES = list(RESOLUTION)


@REWARDS.register("test_image_contrast")
class _Contrast(Reward):
    """Pixel standard deviation: cheap, continuous, different for every image."""
    name = "test_image_contrast"

    def score(self, images, prompts):
        return RewardResult(images.std(dim=(1, 2, 3)))


def _policy(family, path):
    return load_policy(family, str(path), resolution=RESOLUTION[family], options=OPTIONS)


def _pipeline_kwargs(policy):
    kwargs = {"height": policy.resolution, "width": policy.resolution, "max_sequence_length": OPTIONS["max_sequence_length"]}
    if policy.family == "flux":
        kwargs["guidance_scale"] = policy.embedded_guidance
    elif policy.family == "qwen_image":
        kwargs["true_cfg_scale"] = 1.0
    else:
        kwargs["guidance_scale"] = 1.0   # CFG off
    if policy.family == "sana":
        kwargs["use_resolution_binning"] = False
        kwargs["complex_human_instruction"] = None  # solrl encodes as the Sol-RL reference: the prompt alone
    return kwargs


@pytest.mark.parametrize("family", FAMILIES)
def test_sampling_and_decoding_match_the_pipelines_own_loop(family, pipeline_dirs):
    policy = _policy(family, pipeline_dirs(family))
    seeds, steps = [3, 4], 3
    ours = generate(policy, PROMPTS, seeds, steps=steps, batch_size=2)
    noise = initial_noise(seeds, policy.sample_shape)
    latents = pack_2x2(noise) if policy.packed else noise
    # the pipeline with its own default grid: solrl takes the grid from the family's scheduler
    run = dict(prompt=PROMPTS, num_inference_steps=steps, **_pipeline_kwargs(policy))
    theirs = policy.pipe(latents=latents.clone(), output_type="latent", **run).images
    if policy.packed:
        theirs = unpack_2x2(theirs, *policy.sample_shape)
    assert ((ours - theirs).norm() / theirs.norm()).item() < 1e-4
    assert not torch.allclose(ours, noise, atol=1e-2)  # the model did move the samples
    images = policy.pipe(latents=latents.clone(), output_type="pt", **run).images
    torch.testing.assert_close(policy.decode(ours), images, atol=1e-3, rtol=1e-3)
    assert policy.decode(ours).shape == (2, 3, policy.resolution, policy.resolution)


def test_shift_terminal_comes_from_the_scheduler_and_an_explicit_shift_overrides_it(pipeline_dirs):
    """Qwen-Image's real scheduler stretches its grid to end at shift_terminal 0.02 (then 0); the pipeline
    and solrl's sampler agree on it. model.shift=1 gives the plain grid linspace(1, 0, N + 1)."""
    from diffusers import FlowMatchEulerDiscreteScheduler

    policy = _policy("qwen_image", pipeline_dirs("qwen_image"))
    policy.pipe.scheduler = FlowMatchEulerDiscreteScheduler(
        use_dynamic_shifting=True, base_shift=math.log(3), max_shift=math.log(3), base_image_seq_len=256,
        max_image_seq_len=8192, shift_terminal=0.02, time_shift_type="exponential")
    grid = policy.sigmas(4)
    assert float(grid[-2]) == pytest.approx(0.02, abs=1e-6) and float(grid[-1]) == 0.0
    seeds = [3, 4]
    ours = generate(policy, PROMPTS, seeds, steps=4, batch_size=2)
    latents = pack_2x2(initial_noise(seeds, policy.sample_shape))
    theirs = policy.pipe(latents=latents, output_type="latent", prompt=PROMPTS, num_inference_steps=4, **_pipeline_kwargs(policy)).images
    theirs = unpack_2x2(theirs, *policy.sample_shape)
    assert ((ours - theirs).norm() / theirs.norm()).item() < 1e-4
    plain = load_policy("qwen_image", str(pipeline_dirs("qwen_image")), shift=1.0, resolution=32, options=OPTIONS)
    torch.testing.assert_close(plain.sigmas(4), torch.linspace(1, 0, 5, dtype=torch.float64))


def test_dynamic_shifting_is_the_static_shift_at_one_resolution():
    from diffusers import FlowMatchEulerDiscreteScheduler

    sched = FlowMatchEulerDiscreteScheduler(use_dynamic_shifting=True, base_shift=0.5, max_shift=1.15)
    shift = schedule_shift(sched.config, 1024)
    mu = 0.5 + (1.15 - 0.5) * (1024 - 256) / (4096 - 256)
    assert shift == pytest.approx(math.exp(mu))
    sched.set_timesteps(sigmas=[1.0, 0.75, 0.5, 0.25], mu=mu)
    t = torch.tensor([1.0, 0.75, 0.5, 0.25], dtype=torch.float64)
    torch.testing.assert_close(sched.sigmas[:-1].double(), shift * t / (1 + (shift - 1) * t), atol=1e-6, rtol=0)
    assert schedule_shift(FlowMatchEulerDiscreteScheduler(shift=3.0).config, 1024) == 3.0


def _train_config(family, path, out, prompt_file):
    targets = ",".join(_policy_class(family).lora_target_modules)
    return load_config(None, [
        f"model.name={family}", f"model.path={path}", f"model.resolution={RESOLUTION[family]}",
        f"model.options={{max_sequence_length: {OPTIONS['max_sequence_length']}}}", f"out_dir={out}",
        "reward.name=test_image_contrast", "sampling.steps=2", "sampling.batch_size=4",
        f"lora.target_modules=[{targets}]", "lora.rank=4", "lora.alpha=8",
        "train.iterations=1", "train.prompts_per_iter=2", "train.group_size=2", "train.micro_batch=4",
        "train.timestep_fraction=0.5", "train.lr=1e-2", f"train.prompts={prompt_file}", f"eval.split={prompt_file}",
        "rollout.family=sol_rl", "rollout.explore_seeds=4", "rollout.explore_steps=1",
        f"rollout.explore_precision={EXPLORE[family]}",
        "rollout.explore_layers=all",  # the reference's size floors would keep every layer of a tiny model
    ])


def _policy_class(family):
    from solrl.models.diffusers_families import MODEL_FAMILIES as CLASSES

    return CLASSES[family]


@pytest.mark.parametrize("family", FAMILIES)
def test_sol_rl_iteration_then_lora_export_loads_into_the_pipeline(family, pipeline_dirs, tmp_path):
    path = pipeline_dirs(family)
    prompt_file = tmp_path / "prompts.txt"
    prompt_file.write_text("\n".join(PROMPTS) + "\n")
    trainer = Trainer(_train_config(family, path, tmp_path / "run", prompt_file), quiet=True)

    # the explore engine follows the family's rules: real layers quantized, embedders and the last layer not
    report = trainer.engine.report
    assert report.quantized and "proj_out" in report.skipped
    skips = trainer.policy.quant_skip_patterns
    assert not [n for n in report.quantized if any(re.search(p, n) for p in skips)]

    before = {k: v.clone() for k, v in trainer.model.state_dict().items() if "lora_B" in k and ".default." in k}
    record = trainer.run_iteration(0)
    assert record is not None and math.isfinite(record["loss"]) and math.isfinite(record["grad_norm"])
    assert record["seconds_explore"] > 0 and record["seconds_regenerate"] > 0 and record["trained_pairs"] == 4
    assert trainer.state.optimizer_step == 1
    after = trainer.model.state_dict()
    assert any(not torch.equal(v, after[k]) for k, v in before.items())

    # rank 4, alpha 8: the scale 2 must survive every loader (a scale of 1 would hide a lost alpha)
    export = export_lora(trainer.policy, trainer.lora_config, tmp_path / "lora")
    result = check_export(export, trainer.policy, lambda: _policy(family, path), prompts=PROMPTS)
    assert list(result.routes) == list(LOAD_ROUTES)  # peft, model-level and pipeline-level diffusers loaders
    assert result.ok, "\n".join(result.lines())
    assert result.base > 1e-3  # the LoRA changes the prediction, so agreement is not trivial
    fresh = _policy(family, path)
    fresh.pipe.load_lora_weights(str(export), weight_name="pytorch_lora_weights.safetensors", adapter_name="solrl")
    with adapter(trainer.model, TRAINED):
        trained_samples = generate(trainer.policy, PROMPTS, [7, 8], steps=2, batch_size=2)
    torch.testing.assert_close(generate(fresh, PROMPTS, [7, 8], steps=2, batch_size=2), trained_samples, atol=1e-5, rtol=1e-5)


def test_missing_weights_name_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match=str(tmp_path / "nowhere")):
        load_policy("flux", str(tmp_path / "nowhere"))


def test_toy_refuses_diffusers_only_options():
    with pytest.raises(ValueError, match="model.offload"):
        load_policy("toy", offload=True)


def test_an_unreachable_hub_id_is_reported_with_the_id():
    with pytest.raises(FileNotFoundError, match="no-such-org/no-such-model"):
        load_policy("sd3", "no-such-org/no-such-model")


def test_prompt_embeds_of_unequal_lengths_concatenate_with_a_mask():
    from solrl.models.base import PromptEmbeds

    a = PromptEmbeds(torch.ones(1, 2, 3))
    b = PromptEmbeds(torch.ones(2, 4, 3), None, torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]]))
    both = PromptEmbeds.cat([a, b])
    assert both.states.shape == (3, 4, 3) and both.pooled is None
    assert both.mask.tolist() == [[1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]]
    assert both.states[0, 2:].abs().sum() == 0
    assert both.to(dtype=torch.float64).mask.dtype == torch.long  # the mask keeps its dtype
    assert both.index(torch.tensor([2])).mask.tolist() == [[1, 1, 1, 1]]
    assert len(both.repeat_interleave(2)) == 6


def test_memory_options_reach_the_modules(pipeline_dirs):
    policy = load_policy("sd3", str(pipeline_dirs("sd3")), resolution=32, gradient_checkpointing=True, vae_tiling=True,
                         options=OPTIONS)
    assert policy.transformer.gradient_checkpointing and policy.pipe.vae.use_tiling
    x = torch.randn(1, *policy.sample_shape, requires_grad=True)
    policy.velocity(x, torch.tensor([0.5]), policy.encode_prompts(["a red cat"])).square().mean().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()
    with pytest.raises(ValueError, match="unknown model.options"):
        load_policy("sd3", str(pipeline_dirs("sd3")), options={"max_seq_len": 8})


@pytest.mark.parametrize("family", FAMILIES)
def test_prompts_longer_than_the_text_encoder_reads_are_refused(family, pipeline_dirs):
    from solrl.data import PromptSet

    policy = _policy(family, pipeline_dirs(family))
    assert policy.max_prompt_tokens == OPTIONS["max_sequence_length"]
    policy.max_sequence_length = max(policy.count_prompt_tokens(PROMPTS))  # the tiny tokenizers split finely
    PromptSet(PROMPTS, "short.txt").check_fits(policy)
    long_prompt = " and ".join(PROMPTS * 3)
    with pytest.raises(ValueError, match=rf"long.txt.*1 prompt\(s\) exceed the text encoder's limit of {policy.max_sequence_length} tokens"):
        PromptSet([*PROMPTS, long_prompt], "long.txt").check_fits(policy)


@pytest.mark.filterwarnings("ignore:FSDP2-wrapped module.*returned a view tensor")  # checked below: gradients are right
@pytest.mark.parametrize("family", FAMILIES)
def test_fsdp2_shards_each_family_and_keeps_its_velocity(family, pipeline_dirs, tmp_path):
    """train.parallel=fsdp2 on each family's transformer (one-process gloo group): every block list is
    found and sharded, the LoRA parameters become shards, and the velocity and its gradient are unchanged."""
    import torch.distributed as dist
    from torch.distributed.tensor import DTensor

    from solrl.models.lora import TRAINED, adapter_params, add_policy_adapters, lora_config
    from solrl.parallel.sharding import block_lists, full, shard_model

    policy = _policy(family, pipeline_dirs(family))
    add_policy_adapters(policy.transformer, lora_config(4, 8, "gaussian", list(policy.lora_target_modules)))
    x = torch.randn(2, *policy.sample_shape, generator=torch.Generator().manual_seed(0))
    t, cond = torch.tensor([0.3, 0.8]), policy.encode_prompts(PROMPTS)

    def velocity_and_grad():
        v = policy.velocity(x, t, cond)
        v.square().mean().backward()
        grads = {k: full(p.grad).clone() for k, p in adapter_params(policy.transformer, TRAINED).items() if p.grad is not None}
        policy.transformer.zero_grad(set_to_none=True)
        return v.detach(), grads

    before, grads_before = velocity_and_grad()
    blocks = sum(len(stack) for _, stack in block_lists(policy.transformer))
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        assert shard_model(policy.transformer, 1) == blocks + 1
        assert all(isinstance(p, DTensor) for p in adapter_params(policy.transformer, TRAINED).values())
        after, grads_after = velocity_and_grad()
    finally:
        dist.destroy_process_group()
    torch.testing.assert_close(after, before, rtol=1e-5, atol=1e-6)
    assert grads_after.keys() == grads_before.keys() and grads_before  # the same layers take part
    for key, grad in grads_before.items():
        torch.testing.assert_close(grads_after[key], grad, rtol=1e-5, atol=1e-7, msg=key)
