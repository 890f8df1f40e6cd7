"""CLIP embeddings as the reference scorers compute them: HF `CLIPModel` fed as each reference feeds it.

PickScore and the aesthetic predictor take uint8 PIL images through the PIL image processor (shortest
side -> bicubic resize, centre crop, OpenAI/LAION mean/std); transformers' torchvision processor resizes
slightly differently, so it is not used even where torchvision is installed. CLIPScore's reference
(Flow-GRPO / DiffusionNFT `flow_grpo/clip_scorer.py`, NVlabs/Sana `diffusion/post_training/rewards.py`)
transforms the float tensor instead: torchvision `Resize(shortest_edge)` (bilinear, antialiased),
`CenterCrop`, `Normalize`; `tensor_pixels` computes the same with torch alone (torchvision's tensor
resize is `F.interpolate(..., antialias=True)`).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from PIL import Image

from ..images import to_float_nchw, to_uint8_nhwc
from .weights import from_pretrained, torch_device, torch_dtype

OPENAI_MEAN = (0.48145466, 0.4578275, 0.40821073)  # CLIP's pixel statistics, reused by HPSv2 and BLIP
OPENAI_STD = (0.26862954, 0.26130258, 0.27577711)


def cosine(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Row-wise cosine similarity, in float32 whatever the model dtype."""
    a, b = a.float(), b.float()
    return (a / a.norm(dim=-1, keepdim=True) * (b / b.norm(dim=-1, keepdim=True))).sum(-1)


def resized_size(height: int, width: int, shortest: int) -> tuple[int, int]:
    """torchvision's output size for Resize(int): the short side to `shortest`, the long side scaled and truncated."""
    short, long = min(height, width), max(height, width)
    new_long = int(shortest * long / short)
    return (shortest, new_long) if height <= width else (new_long, shortest)


def center_crop_offsets(height: int, width: int, crop_height: int, crop_width: int) -> tuple[int, int]:
    """(top, left) of torchvision's CenterCrop: half the margin, rounded half to even as Python rounds."""
    return int(round((height - crop_height) / 2.0)), int(round((width - crop_width) / 2.0))


def tensor_pixels(images: torch.Tensor, shortest: int, crop: tuple[int, int], mean, std) -> torch.Tensor:
    """Float NCHW images in [0, 1] -> CLIP input, as torchvision's Resize(shortest) (bilinear, antialiased),
    CenterCrop(crop) and Normalize(mean, std) compute it on a float tensor."""
    h, w = images.shape[-2:]
    size = resized_size(h, w, shortest)
    if size != (h, w):
        images = F.interpolate(images, size=size, mode="bilinear", align_corners=False, antialias=True)
    (h, w), (ch, cw) = images.shape[-2:], crop
    top, left = center_crop_offsets(h, w, ch, cw)
    images = images[..., top:top + ch, left:left + cw]
    mean = torch.tensor(mean, dtype=images.dtype).view(1, -1, 1, 1)
    std = torch.tensor(std, dtype=images.dtype).view(1, -1, 1, 1)
    return (images - mean) / std


def _pooled(out) -> torch.Tensor:
    # transformers 5 returns a model output whose pooler_output holds the projected embedding.
    return out.pooler_output if hasattr(out, "pooler_output") else out


class ClipEncoder:
    """`model`/`processor`: local directories or hub ids; the processor defaults to the model's own."""

    def __init__(self, model: str, processor: str | None = None, device=None, dtype="float32", what: str = "CLIP",
                 float_resize: bool = False):
        from transformers import CLIPImageProcessorPil, CLIPModel

        self.device, self.dtype = torch_device(device), torch_dtype(dtype)
        self.model = from_pretrained(CLIPModel.from_pretrained, model, what, dtype=self.dtype).to(self.device).eval()
        self._processor = processor or model
        self.image_processor = from_pretrained(CLIPImageProcessorPil.from_pretrained, self._processor, f"{what} processor")
        self._tokenizer = None
        self.float_resize = float_resize  # CLIPScore's reference: resize the float tensor (tensor_pixels), not uint8 PIL

    @property
    def tokenizer(self):
        if self._tokenizer is None:  # image-only rewards never load it
            from transformers import AutoTokenizer

            self._tokenizer = from_pretrained(AutoTokenizer.from_pretrained, self._processor, "CLIP tokenizer")
        return self._tokenizer

    @property
    def logit_scale(self) -> torch.Tensor:
        return self.model.logit_scale.exp().float()

    def pixel_values(self, images) -> torch.Tensor:
        if self.float_resize:
            p = self.image_processor
            crop = (p.crop_size["height"], p.crop_size["width"])
            pixels = tensor_pixels(to_float_nchw(images), p.size["shortest_edge"], crop, p.image_mean, p.image_std)
        else:
            pil = [Image.fromarray(im) for im in to_uint8_nhwc(images)]
            pixels = self.image_processor(images=pil, return_tensors="pt")["pixel_values"]
        return pixels.to(self.device, self.dtype)

    @torch.no_grad()
    def image_features(self, images) -> torch.Tensor:
        return _pooled(self.model.get_image_features(pixel_values=self.pixel_values(images)))

    @torch.no_grad()
    def text_features(self, prompts: list[str]) -> torch.Tensor:
        max_length = self.model.config.text_config.max_position_embeddings
        tokens = self.tokenizer(prompts, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
        return _pooled(self.model.get_text_features(**tokens.to(self.device)))
