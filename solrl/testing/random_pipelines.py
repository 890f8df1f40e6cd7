"""Random-weight diffusers pipelines built offline, for tests (tiny) and GPU benchmarks (real-size transformer).

Each family's pipeline is assembled from its real component classes with small configs, a byte-level
tokenizer written on the spot (no hub download), and text encoders whose widths are derived from the
transformer config, so any transformer size (e.g. SD3.5-M's or SANA-1.6B's) gets a matching pipeline.
The result is saved with `save_pretrained` and loads back through `solrl.models.load_policy`.
"""
from __future__ import annotations

from pathlib import Path

import torch

from ..models.released import FLUX1_DEV, QWEN_IMAGE, SANA_1600M, SD35_LARGE, SD35_MEDIUM

SPECIALS = ["<pad>", "<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"]
PAD, UNK, BOS, EOS = 0, 1, 2, 3
VOCAB = len(SPECIALS) + 256   # the special tokens + one token per byte

# the smallest configs that keep every linear of interest >= 64 wide (the explore engine's min_features)
TINY_TRANSFORMERS = {
    "sd3": {"sample_size": 16, "patch_size": 2, "in_channels": 4, "out_channels": 4, "num_layers": 2,
            "attention_head_dim": 16, "num_attention_heads": 4, "caption_projection_dim": 64,
            "joint_attention_dim": 64, "pooled_projection_dim": 64, "pos_embed_max_size": 16},
    "flux": {"patch_size": 1, "in_channels": 16, "num_layers": 1, "num_single_layers": 1, "attention_head_dim": 16,
             "num_attention_heads": 4, "joint_attention_dim": 64, "pooled_projection_dim": 32, "guidance_embeds": True,
             "axes_dims_rope": [4, 4, 8]},
    "sana": {"patch_size": 2, "in_channels": 4, "out_channels": 4, "num_layers": 2, "num_attention_heads": 4,
             "attention_head_dim": 16, "num_cross_attention_heads": 4, "cross_attention_head_dim": 16,
             "cross_attention_dim": 64, "caption_channels": 32, "sample_size": 16},
    "qwen_image": {"patch_size": 2, "in_channels": 16, "out_channels": 4, "num_layers": 2, "attention_head_dim": 16,
                   "num_attention_heads": 4, "joint_attention_dim": 16, "guidance_embeds": False,
                   "axes_dims_rope": [8, 4, 4]},
}

# transformer configs of the released checkpoints (solrl/models/released.py), for benchmarks
REAL_TRANSFORMERS = {key: (released.family, dict(released.transformer)) for key, released in (
    ("sd35m", SD35_MEDIUM), ("sd35l", SD35_LARGE), ("flux1", FLUX1_DEV), ("sana16b", SANA_1600M), ("qwen_image", QWEN_IMAGE))}


def byte_tokenizer(model_max_length: int, add_bos_eos: bool = True):
    """A byte-level BPE tokenizer without merges: every prompt encodes, nothing is downloaded."""
    from tokenizers import Tokenizer, decoders, models, processors
    from tokenizers.pre_tokenizers import ByteLevel
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(SPECIALS + sorted(ByteLevel.alphabet()))}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    tok.pre_tokenizer = ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(SPECIALS)
    if add_bos_eos:
        tok.post_processor = processors.TemplateProcessing(single="<s> $A </s>", special_tokens=[("<s>", BOS), ("</s>", EOS)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<s>", eos_token="</s>",
                                   unk_token="<unk>", model_max_length=model_max_length)


def _clip(hidden: int, projection: int | None):
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTextModelWithProjection

    config = CLIPTextConfig(vocab_size=VOCAB, hidden_size=hidden, intermediate_size=37, num_hidden_layers=2,
                            num_attention_heads=4, projection_dim=projection or hidden, bos_token_id=BOS,
                            eos_token_id=EOS, pad_token_id=PAD, max_position_embeddings=77)
    return CLIPTextModelWithProjection(config) if projection else CLIPTextModel(config)


def _t5(width: int):
    from transformers import T5Config, T5EncoderModel

    return T5EncoderModel(T5Config(vocab_size=VOCAB, d_model=width, d_kv=8, d_ff=32, num_layers=1, num_heads=2,
                                   pad_token_id=PAD, eos_token_id=EOS, decoder_start_token_id=PAD))


def _kl_vae(latent_channels: int, levels: int, width: int = 8):
    from diffusers import AutoencoderKL

    return AutoencoderKL(in_channels=3, out_channels=3, block_out_channels=(width,) * levels,
                         down_block_types=("DownEncoderBlock2D",) * levels, up_block_types=("UpDecoderBlock2D",) * levels,
                         latent_channels=latent_channels, layers_per_block=1, norm_num_groups=2, use_quant_conv=False,
                         use_post_quant_conv=False, shift_factor=0.0609, scaling_factor=1.5035)


def _sd3(tcfg: dict, vae_levels: int) -> dict:
    from diffusers import FlowMatchEulerDiscreteScheduler, SD3Transformer2DModel

    clip_projection = tcfg["pooled_projection_dim"] // 2   # SD3 concatenates two CLIP pooled vectors
    return {
        "transformer": SD3Transformer2DModel(**tcfg),
        "text_encoder": _clip(32, clip_projection), "text_encoder_2": _clip(32, clip_projection),
        "text_encoder_3": _t5(tcfg["joint_attention_dim"]),
        "tokenizer": byte_tokenizer(77), "tokenizer_2": byte_tokenizer(77), "tokenizer_3": byte_tokenizer(512),
        "vae": _kl_vae(tcfg["in_channels"], vae_levels), "scheduler": FlowMatchEulerDiscreteScheduler(shift=3.0),
    }


def _flux(tcfg: dict, vae_levels: int) -> dict:
    from diffusers import FlowMatchEulerDiscreteScheduler, FluxTransformer2DModel

    scheduler = FlowMatchEulerDiscreteScheduler(shift=3.0, use_dynamic_shifting=True, base_shift=0.5, max_shift=1.15,
                                                base_image_seq_len=256, max_image_seq_len=4096)
    return {
        "transformer": FluxTransformer2DModel(**tcfg),
        "text_encoder": _clip(tcfg["pooled_projection_dim"], None), "text_encoder_2": _t5(tcfg["joint_attention_dim"]),
        "tokenizer": byte_tokenizer(77), "tokenizer_2": byte_tokenizer(512),
        "vae": _kl_vae(tcfg["in_channels"] // 4, vae_levels), "scheduler": scheduler,
    }


def _sana(tcfg: dict, vae_levels: int) -> dict:
    from diffusers import (
        AutoencoderDC,
        FlowMatchEulerDiscreteScheduler,
        SanaTransformer2DModel,
    )
    from transformers import Gemma2Config, Gemma2Model

    gemma = Gemma2Model(Gemma2Config(
        vocab_size=VOCAB, hidden_size=tcfg["caption_channels"], head_dim=16, intermediate_size=64, num_attention_heads=2,
        num_key_value_heads=2, num_hidden_layers=1, max_position_embeddings=8192, pad_token_id=PAD, bos_token_id=BOS,
        eos_token_id=EOS, attn_implementation="eager"))
    blocks = ("ResBlock",) + ("EfficientViTBlock",) * (vae_levels - 1)
    # DC-AE's decoder shortcut repeats the latent channels up to the first block's width: a block
    # narrower than the latent (SANA-1.6B's 32 channels) would repeat them 0 times
    width = max(8, tcfg["in_channels"])
    vae = AutoencoderDC(in_channels=3, latent_channels=tcfg["in_channels"], attention_head_dim=2,
                        encoder_block_types=blocks, decoder_block_types=blocks,
                        encoder_block_out_channels=(width,) * vae_levels, decoder_block_out_channels=(width,) * vae_levels,
                        encoder_qkv_multiscales=((),) + ((5,),) * (vae_levels - 1),
                        decoder_qkv_multiscales=((),) + ((5,),) * (vae_levels - 1),
                        encoder_layers_per_block=(1,) * vae_levels, decoder_layers_per_block=(1,) * vae_levels,
                        downsample_block_type="conv", upsample_block_type="interpolate", decoder_norm_types="rms_norm",
                        decoder_act_fns="silu", scaling_factor=0.41407)
    # the released SANA uses DPM-Solver with flow_shift 3; Euler with the same shift lets tests
    # compare solrl's Euler sampler against the pipeline's own loop
    return {"transformer": SanaTransformer2DModel(**tcfg), "text_encoder": gemma, "tokenizer": byte_tokenizer(8192),
            "vae": vae, "scheduler": FlowMatchEulerDiscreteScheduler(shift=3.0)}


def _qwen_image(tcfg: dict, vae_levels: int) -> dict:
    from diffusers import (
        AutoencoderKLQwenImage,
        FlowMatchEulerDiscreteScheduler,
        QwenImageTransformer2DModel,
    )
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    width = tcfg["joint_attention_dim"]
    config = Qwen2_5_VLConfig(
        text_config={"hidden_size": width, "intermediate_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2,
                     "num_key_value_heads": 2, "vocab_size": VOCAB + 3, "rope_theta": 1000000.0, "bos_token_id": BOS,
                     "eos_token_id": EOS, "pad_token_id": PAD,
                     "rope_scaling": {"mrope_section": [1, 1, 2], "rope_type": "default", "type": "default"}},
        vision_config={"depth": 1, "hidden_size": 16, "intermediate_size": 16, "num_heads": 2, "out_hidden_size": width},
        hidden_size=width, vocab_size=VOCAB + 3, bos_token_id=BOS, eos_token_id=EOS, vision_start_token_id=VOCAB,
        vision_end_token_id=VOCAB + 1, vision_token_id=VOCAB + 2, image_token_id=VOCAB + 2, video_token_id=VOCAB + 2)
    z = tcfg["in_channels"] // 4
    vae = AutoencoderKLQwenImage(base_dim=z * 6, z_dim=z, dim_mult=[1, 2, 4][:vae_levels + 1], num_res_blocks=1,
                                 temperal_downsample=[False, True, True][:vae_levels], latents_mean=[0.1] * z,
                                 latents_std=[1.5] * z)
    # Qwen-Image's own schedule (dynamic shifting), without its shift_terminal stretch (not reproduced by solrl)
    scheduler = FlowMatchEulerDiscreteScheduler(use_dynamic_shifting=True, base_shift=0.5, max_shift=0.9,
                                                base_image_seq_len=256, max_image_seq_len=8192, time_shift_type="exponential")
    return {"transformer": QwenImageTransformer2DModel(**tcfg), "text_encoder": Qwen2_5_VLForConditionalGeneration(config),
            "tokenizer": byte_tokenizer(1024 + 34, add_bos_eos=False), "vae": vae, "scheduler": scheduler}


BUILDERS = {"sd3": _sd3, "flux": _flux, "sana": _sana, "qwen_image": _qwen_image}
PIPELINES = {"sd3": "StableDiffusion3Pipeline", "flux": "FluxPipeline", "sana": "SanaPipeline", "qwen_image": "QwenImagePipeline"}


def build_random_pipeline(family: str, out_dir: str | Path | None = None, transformer_config: dict | None = None,
                          vae_levels: int = 2, seed: int = 0):
    """A random-weight pipeline of `family` (tiny unless `transformer_config` says otherwise); saved to
    `out_dir` when given. `vae_levels` sets the VAE's downsampling (factor 2 ** (levels - 1), Qwen: 2 ** levels)."""
    import diffusers

    if family not in BUILDERS:
        raise ValueError(f"unknown family {family!r}; choose one of {', '.join(BUILDERS)}")
    torch.manual_seed(seed)
    components = BUILDERS[family](dict(transformer_config or TINY_TRANSFORMERS[family]), vae_levels)
    pipe = getattr(diffusers, PIPELINES[family])(**components)
    if out_dir is not None:
        pipe.save_pretrained(str(out_dir))
    return pipe
