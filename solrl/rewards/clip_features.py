"""CLIP embeddings as the reference scorers compute them: HF `CLIPModel` fed by the PIL processor.

The PIL image processor (shortest side -> bicubic resize, centre crop, OpenAI/LAION mean/std) is
what PickScore, CLIPScore and the aesthetic predictor were run with; transformers' torchvision
processor resizes slightly differently, so it is not used even where torchvision is installed.
"""
from __future__ import annotations

import torch
from PIL import Image

from ..images import to_uint8_nhwc
from .weights import from_pretrained, torch_device, torch_dtype

OPENAI_MEAN = (0.48145466, 0.4578275, 0.40821073)  # CLIP's pixel statistics, reused by HPSv2 and BLIP
OPENAI_STD = (0.26862954, 0.26130258, 0.27577711)


def cosine(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Row-wise cosine similarity, in float32 whatever the model dtype."""
    a, b = a.float(), b.float()
    return (a / a.norm(dim=-1, keepdim=True) * (b / b.norm(dim=-1, keepdim=True))).sum(-1)


def _pooled(out) -> torch.Tensor:
    # transformers 5 returns a model output whose pooler_output holds the projected embedding.
    return out.pooler_output if hasattr(out, "pooler_output") else out


class ClipEncoder:
    """`model`/`processor`: local directories or hub ids; the processor defaults to the model's own."""

    def __init__(self, model: str, processor: str | None = None, device=None, dtype="float32", what: str = "CLIP"):
        from transformers import CLIPImageProcessorPil, CLIPModel

        self.device, self.dtype = torch_device(device), torch_dtype(dtype)
        self.model = from_pretrained(CLIPModel.from_pretrained, model, what, dtype=self.dtype).to(self.device).eval()
        self._processor = processor or model
        self.image_processor = from_pretrained(CLIPImageProcessorPil.from_pretrained, self._processor, f"{what} processor")
        self._tokenizer = None

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
