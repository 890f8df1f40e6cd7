"""The four diffusers families: what differs between SD3.5, FLUX.1, SANA and Qwen-Image.

Per family: how the pipeline's `encode_prompt` output maps onto PromptEmbeds, how the transformer
wants its input (timestep scale, token packing, extra ids), how sample space maps back to the VAE,
which layers LoRA adapts, and which layers the explore engine keeps in full precision.

Explore-engine skip rules (`quant_skip_patterns`, both explore_layers choices): patch/text/time
embedders and the final norm (the first and last layers see the raw signal; Sol-RL keeps them in high
precision). SD3, SANA and Qwen-Image also keep the final projection and the AdaLN modulation linears,
which act on one vector per sample (M = batch size), so quantizing them buys little speed while their
error scales whole residual streams; SD3's reference keeps those too (by name and by its size floor).
FLUX.1 keeps exactly what its reference keeps (NVlabs/Sana `train_scripts/sol_rl/train_flux1.py`:
x_embedder, context_embedder, time_text_embed, norm_out): its AdaLN linears and the final `proj_out`
are quantized there, 495 of FLUX.1-dev's 504 linears. The patterns are anchored: FLUX's single blocks
each have a large `proj_out` too.
"""
from __future__ import annotations

import inspect

import numpy as np
import torch

from .base import PromptEmbeds
from .diffusers_t2i import DiffusersPolicy, calculate_shift, pack_2x2, unpack_2x2
from .explore_layers import SD3_EXPLORE_KEEP, ExploreKeep
from .lora import JOINT_ATTENTION


def flux_grid_arguments(policy, num_steps: int, config) -> dict:
    """FLUX.1's and Qwen-Image's pipelines: sigmas linspace(1, 1/N, N) (None with use_flow_sigmas) and mu always."""
    sigmas = None if config.get("use_flow_sigmas") else np.linspace(1.0, 1 / num_steps, num_steps)
    return {"sigmas": sigmas, "mu": calculate_shift(policy.image_tokens, config, policy.max_shift_default)}


def _call_default(pipe, name: str):
    """A default argument of the pipeline's __call__ (e.g. FLUX's guidance 3.5, SANA's instruction)."""
    return inspect.signature(type(pipe).__call__).parameters[name].default


class SD3Policy(DiffusersPolicy):
    family = "sd3"
    pipeline_class = "StableDiffusion3Pipeline"
    prompt_tokenizer = "tokenizer_3"  # T5
    default_hub_id = "stabilityai/stable-diffusion-3.5-medium"
    text_components = ("text_encoder", "text_encoder_2", "text_encoder_3")
    lora_target_modules = JOINT_ATTENTION
    quant_skip_patterns = (r"^pos_embed\.", r"^time_text_embed\.", r"^context_embedder$", r"^norm_out\.",
                           r"^proj_out$", r"\.norm1(_context)?\.linear$")
    explore_keep = SD3_EXPLORE_KEEP
    default_max_sequence_length = 256        # the pipeline's; the Sol-RL presets encode at 128, as their reference
    max_shift_default = 1.16
    vae_dtype = torch.float32                # the references decode SD3's latents in float32

    def _encode_one(self, prompt):
        states, _, pooled, _ = self.pipe.encode_prompt(prompt, None, None, device=self.device, do_classifier_free_guidance=False,
                                                        max_sequence_length=self.max_sequence_length)
        return PromptEmbeds(states, pooled)

    def _forward(self, x, t, cond):
        return self.transformer(hidden_states=x, timestep=t * 1000, encoder_hidden_states=cond.states,
                                pooled_projections=cond.pooled, return_dict=False)[0]

    def _decode_latents(self, x):
        vae = self.pipe.vae
        return vae.decode(x / vae.config.scaling_factor + vae.config.shift_factor, return_dict=False)[0]


class FluxPolicy(DiffusersPolicy):
    """FLUX.1: T5 states + CLIP pooled vector, 2x2-packed tokens, and (dev) an embedded guidance value,
    which is an input of the distilled model, not classifier-free guidance (rollouts stay CFG-free)."""

    family = "flux"
    pipeline_class = "FluxPipeline"
    prompt_tokenizer = "tokenizer_2"  # T5
    default_hub_id = "black-forest-labs/FLUX.1-dev"
    text_components = ("text_encoder", "text_encoder_2")
    lora_target_modules = ("to_q", "to_k", "to_v", "to_out.0")  # the Sol-RL reference's FLUX targets
    # the reference's nvfp4_skip_modules for FLUX.1 (module docstring); its AdaLN and output linears are quantized
    quant_skip_patterns = (r"^x_embedder$", r"^context_embedder$", r"^time_text_embed\.", r"^norm_out\.")
    explore_keep = ExploreKeep((), 1000)  # Sol-RL's FLUX config: only layers at most 1000 wide (none in FLUX.1)
    default_max_sequence_length = 512        # the pipeline's; the Sol-RL presets encode at 128, as their reference
    vae_dtype = torch.float32                # the Sol-RL reference decodes FLUX.1's latents in float32
    packed = True
    extra_options = ("embedded_guidance",)

    def __init__(self, pipe, **kwargs):
        super().__init__(pipe, **kwargs)
        self.embedded_guidance = float(self.options.get("embedded_guidance", _call_default(pipe, "guidance_scale")))

    def _grid_arguments(self, num_steps, config):
        return flux_grid_arguments(self, num_steps, config)

    def _encode_one(self, prompt):
        states, pooled, _ = self.pipe.encode_prompt(prompt, None, device=self.device, max_sequence_length=self.max_sequence_length)
        return PromptEmbeds(states, pooled)

    def _forward(self, x, t, cond):
        b, c, h, w = x.shape
        img_ids = self.pipe._prepare_latent_image_ids(b, h // 2, w // 2, x.device, x.dtype)
        txt_ids = torch.zeros(cond.states.shape[1], 3, device=x.device, dtype=x.dtype)
        guidance = None
        if self.transformer.config.guidance_embeds:
            guidance = torch.full((b,), self.embedded_guidance, device=x.device, dtype=torch.float32)
        out = self.transformer(hidden_states=pack_2x2(x), timestep=t.to(x.dtype), guidance=guidance,
                               pooled_projections=cond.pooled, encoder_hidden_states=cond.states,
                               txt_ids=txt_ids, img_ids=img_ids, return_dict=False)[0]
        return unpack_2x2(out, c, h, w)

    def _decode_latents(self, x):
        vae = self.pipe.vae
        return vae.decode(x / vae.config.scaling_factor + vae.config.shift_factor, return_dict=False)[0]


class SanaPolicy(DiffusersPolicy):
    """SANA: Gemma-2 states of the prompt alone, masked padding, DC-AE latents.

    The pipeline's __call__ prepends a "complex human instruction" to every prompt; its `encode_prompt`,
    which the Sol-RL reference calls (NVlabs/Sana `train_scripts/sol_rl/train_sana.py`, 300 tokens), does
    not. solrl encodes as the reference unless `model.options.complex_human_instruction` asks: true for
    the pipeline's own instruction, or a list of lines."""

    family = "sana"
    pipeline_class = "SanaPipeline"
    default_hub_id = "Efficient-Large-Model/Sana_1600M_1024px_diffusers"
    text_components = ("text_encoder",)
    lora_target_modules = ("to_q", "to_k", "to_v", "to_out.0")
    quant_skip_patterns = (r"^patch_embed\.", r"^time_embed\.", r"^caption_projection\.", r"^norm_out\.", r"^proj_out$")
    # Sol-RL's SANA config keeps attn.qkv and every layer at most the hidden width (2240) in bf16, and
    # quantizes the cross-attention's fused kv projection, which diffusers splits into to_k / to_v
    explore_keep = ExploreKeep((r"\.attn1\.to_[qkv]$",), "hidden", quantize=(r"\.attn2\.to_[kv]$",))
    default_max_sequence_length = 300
    extra_options = ("complex_human_instruction",)

    def __init__(self, pipe, **kwargs):
        super().__init__(pipe, **kwargs)
        asked = self.options.get("complex_human_instruction")
        if asked is True:
            asked = _call_default(pipe, "complex_human_instruction")
        elif isinstance(asked, str):
            asked = [asked]
        self.instruction = list(asked) if asked else None

    def _encode_one(self, prompt):
        states, mask, _, _ = self.pipe.encode_prompt(prompt, do_classifier_free_guidance=False, device=self.device,
                                                      max_sequence_length=self.max_sequence_length,
                                                      complex_human_instruction=self.instruction)
        return PromptEmbeds(states, None, mask)

    def _forward(self, x, t, cond):
        scale = self.transformer.config.get("timestep_scale", 1.0)
        out = self.transformer(x, encoder_hidden_states=cond.states, encoder_attention_mask=cond.mask,
                               timestep=t * 1000 * scale, return_dict=False)[0]
        if out.shape[1] == 2 * x.shape[1]:  # learned-sigma checkpoints: the first half is the velocity
            out = out.chunk(2, dim=1)[0]
        return out

    def _decode_latents(self, x):
        vae = self.pipe.vae
        return vae.decode(x / vae.config.scaling_factor, return_dict=False)[0]


class QwenImagePolicy(DiffusersPolicy):
    """Qwen-Image: Qwen2.5-VL states (template prefix dropped, natural length, masked when batched),
    2x2-packed tokens, and a video VAE whose latents are normalised per channel."""

    family = "qwen_image"
    pipeline_class = "QwenImagePipeline"
    default_hub_id = "Qwen/Qwen-Image"
    text_components = ("text_encoder",)
    lora_target_modules = JOINT_ATTENTION
    quant_skip_patterns = (r"^img_in$", r"^txt_in$", r"^time_text_embed\.", r"^norm_out\.", r"^proj_out$",
                           r"\.(img|txt)_mod\.")
    default_max_sequence_length = 512
    packed = True

    def _grid_arguments(self, num_steps, config):
        return flux_grid_arguments(self, num_steps, config)

    def _encode_one(self, prompt):
        states, mask = self.pipe.encode_prompt(prompt, device=self.device, max_sequence_length=self.max_sequence_length)
        if mask is None:  # the pipeline drops an all-ones mask; keep it, batches of unequal prompts need one
            mask = torch.ones(states.shape[:2], dtype=torch.long, device=states.device)
        return PromptEmbeds(states, None, mask)

    def _forward(self, x, t, cond):
        b, c, h, w = x.shape
        mask = None if bool(cond.mask.all()) else cond.mask  # as the pipeline: no mask when nothing is padded
        out = self.transformer(hidden_states=pack_2x2(x), timestep=t.to(x.dtype), encoder_hidden_states=cond.states,
                               encoder_hidden_states_mask=mask, img_shapes=[[(1, h // 2, w // 2)]] * b,
                               return_dict=False)[0]
        return unpack_2x2(out, c, h, w)

    def _decode_latents(self, x):
        vae = self.pipe.vae
        shape = (1, vae.config.z_dim, 1, 1, 1)
        mean = torch.tensor(vae.config.latents_mean, device=x.device, dtype=x.dtype).view(shape)
        std = torch.tensor(vae.config.latents_std, device=x.device, dtype=x.dtype).view(shape)
        return vae.decode(x[:, :, None] * std + mean, return_dict=False)[0][:, :, 0]


MODEL_FAMILIES = {cls.family: cls for cls in (SD3Policy, FluxPolicy, SanaPolicy, QwenImagePolicy)}
