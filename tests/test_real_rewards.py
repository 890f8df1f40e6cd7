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


def _float_resize_crop(images_float, size):
    """CLIPScore's reference transform by hand: torchvision Resize(size) on the float tensor, which is
    F.interpolate(bilinear, align_corners=False, antialias=True) at (size, int(size * long / short))
    (torchvision transforms/_functional_tensor.py `resize`, functional.py `_compute_resized_output_size`),
    then CenterCrop (offsets int(round((h - size) / 2))) and Normalize."""
    n, c, h, w = images_float.shape
    new = (size, int(size * w / h)) if h <= w else (int(size * h / w), size)
    x = torch.nn.functional.interpolate(images_float, size=new, mode="bilinear", align_corners=False, antialias=True)
    top, left = int(round((new[0] - size) / 2.0)), int(round((new[1] - size) / 2.0))
    x = x[..., top:top + size, left:left + size]
    return (x - torch.tensor(MEAN, dtype=torch.float32).view(1, 3, 1, 1)) / torch.tensor(STD, dtype=torch.float32).view(1, 3, 1, 1)


def test_clipscore_is_diagonal_logits_over_100_of_the_float_image(tiny_clip):
    path, model, tokenizer = tiny_clip
    images = torch.rand(3, 3, 50, 34, generator=torch.Generator().manual_seed(1))  # portrait: the crop runs along the other axis
    reward = build_reward("clipscore", model=str(path), device="cpu", batch_size=3)
    pixels = _float_resize_crop(images, model.config.vision_config.image_size)
    tokens = tokenizer(PROMPTS, padding=True, return_tensors="pt")
    with torch.no_grad():
        logits = model(pixel_values=pixels, **tokens).logits_per_image
    torch.testing.assert_close(reward(images, PROMPTS).scores, logits.diagonal() / 100, atol=1e-5, rtol=1e-5)
    # PIL bicubic on uint8 (the processor's route, PickScore's) gives other pixels: the test can tell them apart
    assert not torch.allclose(torch.stack([_resize_crop(im, 30) for im in _to_uint8(images)]), pixels, atol=1e-3)


def _to_uint8(images_float):
    return (images_float * 255).round().to(torch.uint8).permute(0, 2, 3, 1).numpy()


def test_clipscore_resize_is_torchvisions_antialiased_bilinear():
    """Anchor worked by hand: a 4 x 4 image whose value is its column index, halved. The antialiased
    bilinear filter (PIL's triangle, support 2 at scale 2) weighs the columns 0, 1, 2 as 3/7, 3/7, 1/7 for the
    first output column and 1, 2, 3 as 1/7, 3/7, 3/7 for the second: 5/7 and 16/7 on every row."""
    from solrl.rewards.clip_features import resized_size, tensor_pixels

    ramp = torch.arange(4.0).repeat(4, 1).view(1, 1, 4, 4)
    out = tensor_pixels(ramp, 2, (2, 2), [0.0], [1.0])
    torch.testing.assert_close(out, torch.tensor([[5 / 7, 16 / 7]] * 2).view(1, 1, 2, 2))
    assert resized_size(512, 768, 224) == (224, 336) and resized_size(700, 500, 224) == (313, 224)
    image = torch.rand(2, 3, 40, 70, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(tensor_pixels(image, 30, (30, 30), MEAN.tolist(), STD.tolist()), _float_resize_crop(image, 30))


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
    with pytest.raises(FileNotFoundError, match="xswu/HPSv2/HPS_v2.1_compressed.pt"):
        build_reward("hpsv2")
    with pytest.raises(FileNotFoundError, match="has no HPS_v2.1_compressed.pt"):
        build_reward("hpsv2", model=str(tmp_path))


# ----------------------------------------------------------------------------- HPSv2 (open_clip layout)

class _OpenClipBlock(torch.nn.Module):
    """open_clip's ResidualAttentionBlock with its parameter names; sequence-first like open_clip 2.0."""

    def __init__(self, width, heads):
        super().__init__()
        from collections import OrderedDict

        self.ln_1, self.ln_2 = torch.nn.LayerNorm(width), torch.nn.LayerNorm(width)
        self.attn = torch.nn.MultiheadAttention(width, heads)
        self.mlp = torch.nn.Sequential(OrderedDict(
            c_fc=torch.nn.Linear(width, 3 * width), gelu=torch.nn.GELU(), c_proj=torch.nn.Linear(3 * width, width)))

    def forward(self, x, mask=None):
        y = self.ln_1(x)
        x = x + self.attn(y, y, y, need_weights=False, attn_mask=mask)[0]
        return x + self.mlp(self.ln_2(x))


class _Tower(torch.nn.Module):
    def __init__(self, width, heads, layers):
        super().__init__()
        self.resblocks = torch.nn.ModuleList(_OpenClipBlock(width, heads) for _ in range(layers))


class _TinyOpenClip(torch.nn.Module):
    """An open_clip CLIP in miniature: same state-dict keys, same forward, written from its source."""

    def __init__(self, vocab, ctx=24, text_width=32, vision_width=40, patch=6, grid=5, embed=16):
        super().__init__()
        rand = lambda *s: torch.nn.Parameter(0.2 * torch.randn(*s))
        self.visual = torch.nn.Module()
        self.visual.conv1 = torch.nn.Conv2d(3, vision_width, patch, patch, bias=False)
        self.visual.class_embedding, self.visual.positional_embedding = rand(vision_width), rand(grid * grid + 1, vision_width)
        self.visual.ln_pre, self.visual.ln_post = torch.nn.LayerNorm(vision_width), torch.nn.LayerNorm(vision_width)
        self.visual.transformer, self.visual.proj = _Tower(vision_width, 2, 2), rand(vision_width, embed)
        self.token_embedding, self.positional_embedding = torch.nn.Embedding(vocab, text_width), rand(ctx, text_width)
        self.transformer, self.ln_final = _Tower(text_width, 2, 3), torch.nn.LayerNorm(text_width)
        self.text_projection, self.logit_scale = rand(text_width, embed), torch.nn.Parameter(torch.tensor(2.0))
        self.register_buffer("attn_mask", torch.full((ctx, ctx), float("-inf")).triu(1), persistent=True)

    def encode_image(self, x):
        v = self.visual
        x = v.conv1(x).flatten(2).transpose(1, 2)
        x = torch.cat([v.class_embedding.expand(x.shape[0], 1, -1), x], 1) + v.positional_embedding
        x = v.ln_pre(x).transpose(0, 1)
        for block in v.transformer.resblocks:
            x = block(x)
        return v.ln_post(x[0]) @ v.proj

    def encode_text(self, ids):  # ids padded with 0 to the full context, EOT = the largest id
        x = (self.token_embedding(ids) + self.positional_embedding).transpose(0, 1)
        for block in self.transformer.resblocks:
            x = block(x, self.attn_mask)
        x = self.ln_final(x.transpose(0, 1))
        return x[torch.arange(len(ids)), ids.argmax(-1)] @ self.text_projection


def _pad_to_square(image_uint8, size):
    """HPSv2's ResizeMaxSize by hand: PIL bicubic on the long side, black borders split evenly."""
    h, w = image_uint8.shape[:2]
    new_h, new_w = round(h * size / max(h, w)), round(w * size / max(h, w))
    small = np.array(Image.fromarray(image_uint8).resize((new_w, new_h), Image.BICUBIC))
    top, left = (size - new_h) // 2, (size - new_w) // 2
    padded = np.pad(small, ((top, size - new_h - top), (left, size - new_w - left), (0, 0)))
    return _normalise(padded)


def test_hpsv2_open_clip_checkpoint_matches_open_clip_forward(tiny_clip, tmp_path):
    clip_dir, _, tokenizer = tiny_clip
    torch.manual_seed(2)
    ref = _TinyOpenClip(len(tokenizer)).eval()
    torch.save({"state_dict": {f"module.{k}": v for k, v in ref.state_dict().items()}}, tmp_path / "HPS_v2.1_compressed.pt")
    reward = build_reward("hpsv2", model=str(tmp_path), tokenizer=str(clip_dir), device="cpu",
                          batch_size=2, vision_heads=2, text_heads=2)
    images = _images(h=36, w=22, seed=3)
    ids = torch.zeros(3, 24, dtype=torch.long)  # open_clip pads with 0 to the context length
    for row, seq in zip(ids, tokenizer(PROMPTS)["input_ids"]):
        row[:len(seq)] = torch.tensor(seq)
    with torch.no_grad():
        img = ref.encode_image(torch.stack([_pad_to_square(im, 30) for im in images]))
        txt = ref.encode_text(ids)
    torch.testing.assert_close(reward(images, PROMPTS).scores, _cos(img, txt), atol=1e-5, rtol=1e-5)


def test_hpsv2_accepts_a_transformers_clip_directory(tiny_clip):
    clip_dir, model, tokenizer = tiny_clip
    reward = build_reward("hpsv2", model=str(clip_dir), device="cpu")
    images = _images(h=20, w=44, seed=4)  # landscape and smaller than the model: upscaled, padded
    tokens = tokenizer(PROMPTS, padding=True, return_tensors="pt")
    with torch.no_grad():
        img = model.get_image_features(pixel_values=torch.stack([_pad_to_square(im, 30) for im in images])).pooler_output
        txt = model.get_text_features(**tokens).pooler_output
    torch.testing.assert_close(reward(images, PROMPTS).scores, _cos(img, txt), atol=1e-5, rtol=1e-5)


def test_hpsv2_rejects_a_foreign_state_dict(tmp_path):
    torch.save({"state_dict": {"encoder.weight": torch.zeros(2, 2)}}, tmp_path / "HPS_v2.1_compressed.pt")
    with pytest.raises(ValueError, match="not understood"):
        build_reward("hpsv2", model=str(tmp_path / "HPS_v2.1_compressed.pt"), device="cpu")


# ----------------------------------------------------------------------------- VLM OCR over HTTP

class _FakeVlm:
    """A chat-completions server on 127.0.0.1 that reads each PNG's colour and answers a fixed text.

    `script` lists what to do per request before answering normally: "500" or "sleep".
    """

    def __init__(self, answers: dict, script=(), sleep=1.0):
        import http.server
        import threading

        self.answers, self.script, self.sleep, self.requests = answers, list(script), sleep, []
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                import base64
                import io
                import json
                import time

                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.requests.append((self.path, self.headers.get("Authorization"), body))
                action = fake.script.pop(0) if fake.script else "ok"
                if action == "sleep":
                    time.sleep(fake.sleep)
                if action == "500":
                    self.send_response(500)
                    self.end_headers()
                    return
                url = body["messages"][0]["content"][1]["image_url"]["url"]
                assert url.startswith("data:image/png;base64,")
                pixel = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))).getpixel((0, 0))
                reply = {"choices": [{"message": {"role": "assistant", "content": fake.answers[pixel]}}]}
                data = json.dumps(reply).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client timed out and hung up: expected in the timeout test

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def _flat_images(colours, size=32):
    return np.stack([np.full((size, size, 3), c, dtype=np.uint8) for c in colours])


def test_vlm_ocr_scores_the_transcription_with_the_ocr_formula():
    from solrl.rewards.ocr import ocr_score

    answers = {(255, 255, 255): "OPEN 24H", (0, 0, 0): '"hallo"', (9, 9, 9): "NONE"}
    server = _FakeVlm(answers)
    try:
        reward = build_reward("vlm_ocr", base_url=server.base_url, model="tiny-vlm", api_key="k", workers=2)
        prompts = ['a sign "Open 24h"', 'a card that says "hello"', 'a mug with "cafe"']
        scores = reward(_flat_images([255, 0, 9]), prompts).scores
    finally:
        server.close()
    assert scores.tolist() == pytest.approx([ocr_score("OPEN 24H", "Open 24h"), ocr_score("hallo", "hello"), 0.0])
    assert scores[1] == pytest.approx(0.8)  # the quotes around "hallo" were dropped before scoring
    path, auth, body = server.requests[0]
    assert path == "/v1/chat/completions" and auth == "Bearer k" and body["model"] == "tiny-vlm"


def test_vlm_ocr_retries_after_a_server_error():
    server = _FakeVlm({(255, 255, 255): "hello"}, script=["500"])
    try:
        reward = build_reward("vlm_ocr", base_url=server.base_url, model="m", retries=3, backoff=0.01)
        scores = reward(_flat_images([255]), ['"hello"']).scores
    finally:
        server.close()
    assert scores.tolist() == [1.0] and len(server.requests) == 2


def test_vlm_ocr_timeout_gives_a_clear_error():
    from solrl.rewards.chat_client import ChatError

    server = _FakeVlm({(255, 255, 255): "hello"}, script=["sleep", "sleep"], sleep=1.0)
    try:
        reward = build_reward("vlm_ocr", base_url=server.base_url, model="m", timeout=0.2, retries=2, backoff=0.01)
        with pytest.raises(ChatError, match="failed after 2 attempts.*timed out"):
            reward(_flat_images([255]), ['"hello"'])
    finally:
        server.close()
    assert len(server.requests) == 2


def test_vlm_ocr_needs_an_endpoint(monkeypatch):
    for var in ("SOLRL_VLM_BASE_URL", "OPENAI_BASE_URL", "SOLRL_VLM_MODEL"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(ValueError, match="base_url and model"):
        build_reward("vlm_ocr")


# ----------------------------------------------------------------------------- ImageReward (BLIP layout)

class _TimmBlock(torch.nn.Module):
    """BLIP's ViT block (timm names): pre-norm, fused qkv, eps 1e-6."""

    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = torch.nn.LayerNorm(width, eps=1e-6), torch.nn.LayerNorm(width, eps=1e-6)
        self.attn = torch.nn.Module()
        self.attn.qkv, self.attn.proj = torch.nn.Linear(width, 3 * width), torch.nn.Linear(width, width)
        self.mlp = torch.nn.Module()
        self.mlp.fc1, self.mlp.fc2 = torch.nn.Linear(width, 2 * width), torch.nn.Linear(2 * width, width)

    def forward(self, x):
        b, n, c = x.shape
        q, k, v = self.attn.qkv(self.norm1(x)).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        att = ((q @ k.transpose(-2, -1)) * (c // self.heads) ** -0.5).softmax(-1)
        x = x + self.attn.proj((att @ v).transpose(1, 2).reshape(b, n, c))
        return x + self.mlp.fc2(torch.nn.functional.gelu(self.mlp.fc1(self.norm2(x))))


class _TinyBlipVit(torch.nn.Module):
    def __init__(self, width=24, patch=8, grid=4, layers=2, heads=2):
        super().__init__()
        self.patch_embed = torch.nn.Module()
        self.patch_embed.proj = torch.nn.Conv2d(3, width, patch, patch)
        self.cls_token = torch.nn.Parameter(0.2 * torch.randn(1, 1, width))
        self.pos_embed = torch.nn.Parameter(0.2 * torch.randn(1, grid * grid + 1, width))
        self.blocks = torch.nn.ModuleList(_TimmBlock(width, heads) for _ in range(layers))
        self.norm = torch.nn.LayerNorm(width, eps=1e-6)

    def forward(self, x):
        x = self.patch_embed.proj(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(len(x), -1, -1), x], 1) + self.pos_embed
        for block in self.blocks:
            x = block(x)
        return self.norm(x)


def _bert_tokenizer(path):
    from transformers import BertTokenizer

    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + sorted({w for p in PROMPTS for w in p.lower().split()})
    tokenizer = BertTokenizer(vocab={w: i for i, w in enumerate(words)})
    tokenizer.save_pretrained(str(path))
    return tokenizer


def _torchvision_crop(image_uint8, size):
    """ImageReward's Resize(size, BICUBIC) + CenterCrop(size) with torchvision's rounding."""
    h, w = image_uint8.shape[:2]
    new_h, new_w = (size, int(size * w / h)) if h <= w else (int(size * h / w), size)
    arr = np.array(Image.fromarray(image_uint8).resize((new_w, new_h), Image.BICUBIC))
    top, left = round((new_h - size) / 2), round((new_w - size) / 2)
    return _normalise(arr[top:top + size, left:left + size])


def test_imagereward_matches_blip_forward_and_standardisation(tmp_path):
    from transformers import BlipTextConfig, BlipTextModel

    from solrl.rewards.imagereward import IR_MEAN, IR_STD

    torch.manual_seed(3)
    tokenizer = _bert_tokenizer(tmp_path / "bert")
    vit = _TinyBlipVit().eval()
    text = BlipTextModel(BlipTextConfig(vocab_size=len(tokenizer), hidden_size=16, encoder_hidden_size=24,
                                        intermediate_size=20, num_hidden_layers=2, num_attention_heads=4,
                                        max_position_embeddings=40, is_decoder=True), add_pooling_layer=False).eval()
    sizes = [16, 10, 8, 6, 4, 1]
    linears = [torch.nn.Linear(a, b) for a, b in itertools.pairwise(sizes)]
    state = {f"blip.visual_encoder.{k}": v for k, v in vit.state_dict().items()}
    state.update({f"blip.text_encoder.{k}": v for k, v in text.state_dict().items()})
    state["blip.text_encoder.embeddings.position_ids"] = torch.arange(40)[None]  # BLIP saves this buffer
    state["blip.text_proj.weight"] = torch.zeros(4, 16)  # unused by the score: ignored
    state.update({f"mlp.layers.{i}.{k}": v for i, lin in zip((0, 2, 4, 6, 7), linears) for k, v in lin.state_dict().items()})
    torch.save(state, tmp_path / "ImageReward.pt")

    reward = build_reward("imagereward", model=str(tmp_path), tokenizer=str(tmp_path / "bert"), device="cpu",
                          batch_size=2, vision_heads=2, text_heads=4)
    images = _images(h=42, w=38, seed=5)  # resized 35x32: a margin of 3 rounds up (torchvision), not down
    tokens = tokenizer(PROMPTS, padding="max_length", max_length=35, return_tensors="pt")
    with torch.no_grad():
        image_embeds = vit(torch.stack([_torchvision_crop(im, 32) for im in images]))
        cls = text(**tokens, encoder_hidden_states=image_embeds, is_decoder=False).last_hidden_state[:, 0]
        for lin in linears:
            cls = lin(cls)
    expected = (cls.squeeze(-1) - IR_MEAN) / IR_STD
    torch.testing.assert_close(reward(images, PROMPTS).scores, expected, atol=1e-5, rtol=1e-5)


def test_imagereward_missing_checkpoint_names_the_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="THUDM/ImageReward/ImageReward.pt"):
        build_reward("imagereward")
    with pytest.raises(FileNotFoundError, match="has no ImageReward.pt"):
        build_reward("imagereward", model=str(tmp_path))



def test_missing_processor_or_tokenizer_names_the_hub_id(tiny_clip):
    clip_dir, _, _ = tiny_clip
    with pytest.raises(FileNotFoundError, match="nobody/no-such-processor"):
        build_reward("clipscore", model=str(clip_dir), processor="nobody/no-such-processor", device="cpu")
    with pytest.raises(FileNotFoundError, match="nobody/no-such-tokenizer"):
        build_reward("hpsv2", model=str(clip_dir), tokenizer="nobody/no-such-tokenizer", device="cpu")
