"""Model rewards on tiny random-weight models saved to disk and loaded through build_reward.

Each score is recomputed here by hand from the raw model's features (and hand-made pixels), so a
wrong resize, normalisation, pooling or scale shows up as a mismatch.
"""
import itertools

import numpy as np
import pytest
import torch
from PIL import Image

from solrl.rewards import build_reward

MEAN = np.array([0.48145466, 0.4578275, 0.40821073])
STD = np.array([0.26862954, 0.26130258, 0.27577711])
PROMPTS = ["a red cat", "two dogs on grass", 'a sign that says "hi"']


def _images(h=40, w=48, n=3, seed=0):
    return np.random.default_rng(seed).integers(0, 256, (n, h, w, 3), dtype=np.uint8)


def _normalise(arr_uint8) -> torch.Tensor:
    """uint8 HWC -> CHW float normalised with the OpenAI CLIP mean/std."""
    return torch.tensor(((arr_uint8 / 255.0 - MEAN) / STD).transpose(2, 0, 1), dtype=torch.float32)


def _resize_crop(image_uint8, size):
    """The CLIP processor by hand: shortest side -> size (PIL bicubic), centre crop size x size."""
    h, w = image_uint8.shape[:2]
    short, long = min(h, w), max(h, w)
    new_long = int(size * long / short)
    new_w, new_h = (new_long, size) if w >= h else (size, new_long)
    arr = np.array(Image.fromarray(image_uint8).resize((new_w, new_h), Image.BICUBIC))
    top, left = (new_h - size) // 2, (new_w - size) // 2
    return _normalise(arr[top:top + size, left:left + size])


# ----------------------------------------------------------------------------- tiny CLIP

def _clip_tokenizer():
    from tokenizers import pre_tokenizers
    from transformers import CLIPTokenizer

    chars = sorted(pre_tokenizers.ByteLevel.alphabet())
    words = chars + [c + "</w>" for c in chars] + ["<|startoftext|>", "<|endoftext|>"]
    return CLIPTokenizer(vocab={t: i for i, t in enumerate(words)}, merges=[])


def _clip_config(tokenizer, image_size=30, hidden_act="quick_gelu"):
    from transformers import CLIPConfig

    eos = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    text = {"vocab_size": len(tokenizer), "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2,
            "num_attention_heads": 2, "max_position_embeddings": 24, "hidden_act": hidden_act,
            "bos_token_id": tokenizer.convert_tokens_to_ids("<|startoftext|>"), "eos_token_id": eos, "pad_token_id": eos}
    vision = {"hidden_size": 40, "intermediate_size": 56, "num_hidden_layers": 2, "num_attention_heads": 2,
              "image_size": image_size, "patch_size": 6, "hidden_act": hidden_act}
    return CLIPConfig(text_config=text, vision_config=vision, projection_dim=16, logit_scale_init_value=2.3)


@pytest.fixture(scope="module")
def tiny_clip(tmp_path_factory):
    """(directory, model, tokenizer): a random CLIP with its PIL processor saved beside it."""
    from transformers import CLIPImageProcessorPil, CLIPModel, CLIPProcessor

    torch.manual_seed(0)
    tokenizer = _clip_tokenizer()
    model = CLIPModel(_clip_config(tokenizer)).eval()
    path = tmp_path_factory.mktemp("tiny_clip")
    model.save_pretrained(str(path))
    image_processor = CLIPImageProcessorPil(size={"shortest_edge": 30}, crop_size={"height": 30, "width": 30})
    CLIPProcessor(image_processor=image_processor, tokenizer=tokenizer).save_pretrained(str(path))
    return path, model, tokenizer


def _clip_embeddings(model, tokenizer, images, prompts):
    pixels = torch.stack([_resize_crop(im, model.config.vision_config.image_size) for im in images])
    tokens = tokenizer(prompts, padding=True, return_tensors="pt")
    with torch.no_grad():
        img = model.get_image_features(pixel_values=pixels).pooler_output
        txt = model.get_text_features(**tokens).pooler_output
    return pixels, tokens, img, txt


def _cos(a, b):
    return torch.nn.functional.cosine_similarity(a, b, dim=-1)


def test_pickscore_matches_hand_formula(tiny_clip):
    path, model, tokenizer = tiny_clip
    images = _images()
    reward = build_reward("pickscore", model=str(path), processor=str(path), device="cpu", batch_size=2)
    _, _, img, txt = _clip_embeddings(model, tokenizer, images, PROMPTS)
    expected = model.logit_scale.exp() * _cos(img, txt) / 26
    got = reward(images, PROMPTS).scores
    assert got.shape == (3,)
    torch.testing.assert_close(got, expected.float(), atol=1e-5, rtol=1e-5)


def test_pickscore_runs_in_bfloat16(tiny_clip):
    path, _, _ = tiny_clip
    images = _images()
    fp32 = build_reward("pickscore", model=str(path), processor=str(path), device="cpu")(images, PROMPTS).scores
    reward = build_reward("pickscore", model=str(path), processor=str(path), device="cpu", dtype="bfloat16")
    assert reward.encoder.model.dtype == torch.bfloat16
    bf16 = reward(images, PROMPTS).scores
    assert bf16.dtype == torch.float32 and not torch.equal(bf16, fp32)
    torch.testing.assert_close(bf16, fp32, atol=0.05, rtol=0)


def test_clipscore_is_diagonal_logits_over_100(tiny_clip):
    path, model, tokenizer = tiny_clip
    images = _images(h=50, w=34, seed=1)  # portrait: the crop runs along the other axis
    reward = build_reward("clipscore", model=str(path), device="cpu", batch_size=3)
    pixels, tokens, _, _ = _clip_embeddings(model, tokenizer, images, PROMPTS)
    with torch.no_grad():
        logits = model(pixel_values=pixels, **tokens).logits_per_image
    torch.testing.assert_close(reward(images, PROMPTS).scores, logits.diagonal() / 100, atol=1e-5, rtol=1e-5)


def test_aesthetic_is_head_of_normalised_image_embedding(tiny_clip, tmp_path):
    path, model, tokenizer = tiny_clip
    torch.manual_seed(1)
    sizes = [16, 12, 8, 6, 4, 1]
    linears = [torch.nn.Linear(a, b) for a, b in itertools.pairwise(sizes)]
    state = {f"layers.{i}.{k}": v for i, lin in zip((0, 2, 4, 6, 7), linears) for k, v in lin.state_dict().items()}
    torch.save(state, tmp_path / "sac+logos+ava1-l14-linearMSE.pth")
    reward = build_reward("aesthetic", model=str(path), head=str(tmp_path), device="cpu", batch_size=2)
    images = _images(seed=2)
    _, _, img, _ = _clip_embeddings(model, tokenizer, images, PROMPTS)
    x = img / img.norm(dim=-1, keepdim=True)
    with torch.no_grad():
        for lin in linears:  # no activations: the reference head is affine
            x = lin(x)
    torch.testing.assert_close(reward(images, PROMPTS).scores, x.squeeze(-1), atol=1e-5, rtol=1e-5)


def test_missing_weights_name_the_expected_location(tmp_path):
    missing = tmp_path / "no_such_model"
    with pytest.raises(FileNotFoundError, match="no_such_model"):
        build_reward("pickscore", model=str(missing), processor=str(missing))
    with pytest.raises(FileNotFoundError, match="openai/clip-vit-large-patch14"):
        build_reward("clipscore")  # offline in tests: the hub id cannot be resolved
