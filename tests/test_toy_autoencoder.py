"""The toy autoencoder and the latent toy model: shapes, normalisation, save/load, pretraining and a
training iteration in latent space."""
import json

import numpy as np
import pytest
import torch

from solrl.models.toy import ToyPolicy, latent_transformer_config
from solrl.models.toy_autoencoder import AUTOENCODER_DIR, ToyAutoencoder


def _images(n: int, seed: int = 0) -> torch.Tensor:
    from solrl.toyworld.grammar import parse_prompt, split_prompts
    from solrl.toyworld.render import render_scene

    rng = np.random.default_rng(seed)
    scenes = [parse_prompt(p) for p in split_prompts("train")[:n]]
    return ToyPolicy.encode_images(np.stack([render_scene(s, rng) for s in scenes]))


def test_normalisation_is_undone_by_decode_and_survives_save_and_load(tmp_path):
    torch.manual_seed(0)
    ae = ToyAutoencoder(latent_channels=8, width=16).eval()
    x = _images(3)
    with torch.no_grad():
        raw = ae.encode_raw(x)
        ae.shift.copy_(raw.mean((0, 2, 3)))
        ae.scale.copy_(raw.std((0, 2, 3)))
        z = ae.encode(x)
        assert z.shape == (3, *ae.latent_shape) == (3, 8, 8, 8)
        torch.testing.assert_close(z.mean((0, 2, 3)), torch.zeros(8), atol=1e-5, rtol=0)   # normalised
        torch.testing.assert_close(ae.decode(z), ae.decode_raw(raw), atol=1e-5, rtol=1e-5)  # and undone
    ae.save(tmp_path / "ae")
    again = ToyAutoencoder.load(tmp_path / "ae")
    for name, value in ae.state_dict().items():
        assert torch.equal(value, again.state_dict()[name]), name


def test_latent_transformer_keeps_the_pixel_models_token_count():
    from solrl.models.toy import TOY_TRANSFORMER_CONFIG

    cfg = latent_transformer_config((8, 8, 8))
    tokens = lambda c: (c["sample_size"] // c["patch_size"]) ** 2
    assert tokens(cfg) == tokens(TOY_TRANSFORMER_CONFIG) == 64 and cfg["in_channels"] == cfg["out_channels"] == 8


@pytest.mark.slow
def test_latent_pretraining_writes_a_model_the_trainer_runs_on(tmp_path):
    from solrl.config import load_config
    from solrl.toyworld.pretrain import PretrainConfig, pretrain_toy
    from solrl.toyworld.pretrain_autoencoder import AutoencoderConfig, pretrain_autoencoder
    from solrl.training.trainer import Trainer

    quiet = lambda *a: None
    ae_dir = pretrain_autoencoder(AutoencoderConfig(out=str(tmp_path / "ae"), steps=2, batch_size=4, width=16), log=quiet)
    info = json.loads((ae_dir / "training.json").read_text())
    # the renders pass; an autoencoder two steps old reconstructs nothing the gold check would pass
    assert info["held_out"]["gold_renders"] >= 0.95 and info["held_out"]["gold_reconstructions"] == 0.0
    model_dir = pretrain_toy(PretrainConfig(out=str(tmp_path / "model"), steps=2, batch_size=4, snapshot_every=0,
                                            autoencoder=str(ae_dir)), log=quiet)
    assert (model_dir / AUTOENCODER_DIR / "autoencoder.safetensors").exists()
    policy = ToyPolicy.from_pretrained(model_dir)
    assert policy.sample_shape == (8, 8, 8) and policy.transformer.config.patch_size == 1
    # continuing a latent model finds its autoencoder without being told
    again = pretrain_toy(PretrainConfig(out=str(tmp_path / "again"), steps=1, batch_size=2, snapshot_every=0,
                                        init=str(model_dir)), log=quiet)
    assert ToyPolicy.from_pretrained(again).sample_shape == (8, 8, 8)
    images = policy.decode(torch.randn(2, *policy.sample_shape))
    assert images.shape == (2, 3, 32, 32) and 0 <= images.min() and images.max() <= 1
    uint8 = ((_images(2).permute(0, 2, 3, 1) + 1) * 127.5).round().to(torch.uint8).numpy()
    assert policy.encode(uint8).shape == (2, 8, 8, 8)
    cfg = load_config(None, [
        f"model.path={model_dir}", f"out_dir={tmp_path / 'run'}", "sampling.steps=2",
        "sampling.batch_size=8", "lora.rank=4", "lora.alpha=8", "train.iterations=1", "train.prompts_per_iter=2",
        "train.group_size=2", "train.micro_batch=4", "train.eval_every=0", "train.checkpoint_every=0",
        "rollout.family=sol_rl", "rollout.explore_seeds=4", "rollout.explore_steps=1", "rollout.explore_precision=bf16",
    ])
    record = Trainer(cfg, quiet=True).run_iteration(0)
    assert record is not None and np.isfinite(record["loss"])


def test_a_wide_toy_has_heads_of_64_and_refuses_other_widths():
    """The timing benches' --width: the toy's layers and tokens, heads of 64, as wide as asked."""
    from solrl.models.toy import build_toy_transformer

    wide = build_toy_transformer(0, (8, 8, 8), width=256)
    assert (wide.config.num_attention_heads, wide.config.attention_head_dim) == (4, 64)
    assert wide.config.num_layers == 6 and wide.config.sample_size == 8 and wide.config.caption_projection_dim == 256
    out = wide(hidden_states=torch.randn(2, 8, 8, 8), encoder_hidden_states=torch.randn(2, 5, wide.config.joint_attention_dim),
               pooled_projections=torch.randn(2, wide.config.pooled_projection_dim), timestep=torch.tensor([500.0, 500.0])).sample
    assert out.shape == (2, 8, 8, 8)
    with pytest.raises(ValueError, match="multiple of 64"):
        build_toy_transformer(0, (8, 8, 8), width=200)
