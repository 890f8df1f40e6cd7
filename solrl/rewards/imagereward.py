"""ImageReward v1.0 (Xu et al.): BLIP text encoder cross-attending to the image, CLS -> linear head,
standardised with the constants the reference ships. Runs on transformers' BLIP classes, so the
`image-reward` package (and its timm/fairscale/torchvision stack) is not needed.
"""
from __future__ import annotations

import numpy as np
import torch
from PIL import Image

from ..images import to_uint8_nhwc
from .base import REWARDS, Reward, RewardResult
from .batching import batched
from .clip_features import OPENAI_MEAN, OPENAI_STD, center_crop_offsets, resized_size
from .linear_head import linear_head_from_state
from .weights import (
    from_pretrained,
    load_state_dict,
    local_file,
    torch_device,
    torch_dtype,
)

IR_REPO, IR_FILE = "THUDM/ImageReward", "ImageReward.pt"
IR_MEAN, IR_STD = 0.16717362830052426, 1.0333394966054072  # ImageReward.py's reward standardisation
IR_MAX_TOKENS = 35


def resize_center_crop(image_uint8: np.ndarray, size: int) -> np.ndarray:
    """torchvision's Resize(size, BICUBIC) + CenterCrop(size) on a PIL image, as ImageReward's `_transform`."""
    new_h, new_w = resized_size(*image_uint8.shape[:2], size)
    arr = np.asarray(Image.fromarray(image_uint8).resize((new_w, new_h), Image.BICUBIC))
    top, left = center_crop_offsets(new_h, new_w, size, size)
    return arr[top:top + size, left:left + size]


def imagereward_pixels(images, size: int) -> torch.Tensor:
    arr = np.stack([resize_center_crop(im, size) for im in to_uint8_nhwc(images)]).astype(np.float32) / 255
    arr = (arr - np.array(OPENAI_MEAN, np.float32)) / np.array(OPENAI_STD, np.float32)
    return torch.from_numpy(arr).permute(0, 3, 1, 2).contiguous()


@REWARDS.register("imagereward")
class ImageReward(Reward):
    """`model`: ImageReward.pt, a directory holding it, or a hub repo; `tokenizer`: bert-base-uncased or a copy."""

    name = "imagereward"

    def __init__(self, model: str = IR_REPO, tokenizer: str = "bert-base-uncased", device=None, dtype="float32",
                 batch_size: int = 32, vision_heads: int = 16, text_heads: int = 12):
        from transformers import AutoTokenizer

        from .blip_convert import blip_towers, split_prefix

        self.device, self.dtype, self.batch_size = torch_device(device), torch_dtype(dtype), batch_size
        state = load_state_dict(local_file(model, IR_FILE, "reward imagereward (ImageReward.pt)"))
        vit, bert = split_prefix(state, "blip.visual_encoder."), split_prefix(state, "blip.text_encoder.")
        if not vit or not bert:
            raise ValueError("reward imagereward: checkpoint lacks blip.visual_encoder.* / blip.text_encoder.* weights")
        self.vision, self.text = blip_towers(vit, bert, vision_heads, text_heads, self.device, self.dtype)
        self.head = linear_head_from_state(state, prefix="mlp.layers.").to(self.device)
        # The BLIP tokenizer adds [DEC]/[ENC] to bert-base-uncased; scoring uses neither, so plain BERT ids match.
        self.tokenizer = from_pretrained(AutoTokenizer.from_pretrained, tokenizer, "reward imagereward tokenizer")

    @torch.no_grad()
    def _score_chunk(self, images, prompts):
        pixels = imagereward_pixels(images, self.vision.config.image_size).to(self.device, self.dtype)
        tokens = self.tokenizer(prompts, padding="max_length", truncation=True, max_length=IR_MAX_TOKENS,
                                return_tensors="pt").to(self.device)
        image_embeds = self.vision(pixel_values=pixels).last_hidden_state
        image_mask = torch.ones(image_embeds.shape[:-1], dtype=torch.long, device=self.device)
        out = self.text(input_ids=tokens["input_ids"], attention_mask=tokens["attention_mask"],
                        encoder_hidden_states=image_embeds, encoder_attention_mask=image_mask, is_decoder=False)
        return ((self.head(out.last_hidden_state[:, 0].float()) - IR_MEAN) / IR_STD).squeeze(-1)

    def score(self, images, prompts):
        return RewardResult(batched(self._score_chunk, images, prompts, self.batch_size))
