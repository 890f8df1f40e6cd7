"""HPSv2.1 (Wu et al.): cosine of open_clip ViT-H-14 image and text embeddings, run on HF `CLIPModel`.

The official `HPS_v2.1_compressed.pt` is an open_clip state dict; it is converted on load (see
`openclip_convert`), so neither open_clip nor torchvision is needed. Preprocessing is HPSv2's
`ResizeMaxSize`: longest side -> image size (PIL bicubic), zero-pad to a square, OpenAI mean/std.
"""
from __future__ import annotations

import os

import numpy as np
import torch
from PIL import Image

from ..images import to_uint8_nhwc
from .base import REWARDS, Reward, RewardResult
from .batching import batched
from .clip_features import OPENAI_MEAN, OPENAI_STD, cosine
from .clip_similarity import LAION_H14
from .weights import (
    from_pretrained,
    load_state_dict,
    local_file,
    torch_device,
    torch_dtype,
)

HPS_REPO, HPS_FILE = "xswu/HPSv2", "HPS_v2.1_compressed.pt"


def resize_longest_and_pad(image_uint8: np.ndarray, size: int) -> np.ndarray:
    """Longest side -> `size` keeping the aspect ratio, then centre the image on a black square.

    HPSv2 skips the pad when no resize is needed; padding always keeps a non-square input square.
    """
    h, w = image_uint8.shape[:2]
    scale = size / max(h, w)
    new_h, new_w = round(h * scale), round(w * scale)  # Python rounding, as the reference
    resized = np.asarray(Image.fromarray(image_uint8).resize((new_w, new_h), Image.BICUBIC)) if scale != 1 else image_uint8
    out = np.zeros((size, size, image_uint8.shape[2]), dtype=np.uint8)
    top, left = (size - new_h) // 2, (size - new_w) // 2
    out[top:top + new_h, left:left + new_w] = resized
    return out


def hps_pixels(images, size: int) -> torch.Tensor:
    arr = np.stack([resize_longest_and_pad(im, size) for im in to_uint8_nhwc(images)]).astype(np.float32) / 255
    arr = (arr - np.array(OPENAI_MEAN, np.float32)) / np.array(OPENAI_STD, np.float32)
    return torch.from_numpy(arr).permute(0, 3, 1, 2).contiguous()


def _is_hf_dir(name: str) -> bool:
    return os.path.isfile(os.path.join(os.path.expanduser(str(name)), "config.json"))


@REWARDS.register("hpsv2")
class HPSv2(Reward):
    """`model`: the open_clip checkpoint (file, directory holding HPS_v2.1_compressed.pt, or hub repo),
    or a transformers CLIP directory. Head counts apply to open_clip checkpoints only."""

    name = "hpsv2"

    def __init__(self, model: str = HPS_REPO, tokenizer: str | None = None, device=None, dtype="float32",
                 batch_size: int = 32, vision_heads: int = 16, text_heads: int = 16):
        from transformers import AutoTokenizer, CLIPModel

        self.device, self.dtype, self.batch_size = torch_device(device), torch_dtype(dtype), batch_size
        if _is_hf_dir(model):
            self.model = CLIPModel.from_pretrained(os.path.expanduser(model), dtype=self.dtype).to(self.device).eval()
            tokenizer = tokenizer or model
        else:
            from .openclip_convert import clip_from_openclip

            state = load_state_dict(local_file(model, HPS_FILE, "reward hpsv2 (HPSv2.1 open_clip checkpoint)"))
            self.model = clip_from_openclip(state, vision_heads, text_heads, self.device, self.dtype)
        self.tokenizer = from_pretrained(AutoTokenizer.from_pretrained, tokenizer or LAION_H14, "reward hpsv2 tokenizer")

    @torch.no_grad()
    def _score_chunk(self, images, prompts):
        pixels = hps_pixels(images, self.model.config.vision_config.image_size).to(self.device, self.dtype)
        context = self.model.config.text_config.max_position_embeddings
        tokens = self.tokenizer(prompts, padding=True, truncation=True, max_length=context, return_tensors="pt")
        img = self.model.get_image_features(pixel_values=pixels).pooler_output
        txt = self.model.get_text_features(**tokens.to(self.device)).pooler_output
        return cosine(img, txt)

    def score(self, images, prompts):
        return RewardResult(batched(self._score_chunk, images, prompts, self.batch_size))
