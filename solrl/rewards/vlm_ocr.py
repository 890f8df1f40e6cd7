"""OCR reward read by a vision-language model behind any OpenAI-compatible chat endpoint.

The VLM only transcribes; scoring is the OCR reward's own formula (`ocr.ocr_score`), so the two
OCR rewards differ in the reader alone.
"""
from __future__ import annotations

import base64
import io
import os
from concurrent.futures import ThreadPoolExecutor

import torch
from PIL import Image

from ..images import to_uint8_nhwc
from .base import REWARDS, Reward, RewardResult
from .chat_client import chat_completion
from .ocr import check_ocr_prompts, ocr_score, ocr_target

INSTRUCTION = ("Transcribe all text visible in this image exactly as written. Reply with the text only, "
               "no quotes or commentary. If there is no text, reply NONE.")


def png_data_url(image_uint8) -> str:
    buf = io.BytesIO()
    Image.fromarray(image_uint8.squeeze(-1) if image_uint8.shape[-1] == 1 else image_uint8).save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def parse_transcription(answer: str) -> str:
    """The model's reply as recognised text: code fences and wrapping quotes dropped, NONE -> ''."""
    text = answer.strip().strip("`").strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        text = text[1:-1]
    return "" if text.upper() == "NONE" else text


def _env(value, *names):
    return value if value is not None else next((os.environ[n] for n in names if os.environ.get(n)), None)


@REWARDS.register("vlm_ocr")
class VlmOcr(Reward):
    """`base_url`/`model`/`api_key` default to $SOLRL_VLM_BASE_URL/$SOLRL_VLM_MODEL/$SOLRL_VLM_API_KEY
    (then $OPENAI_BASE_URL/$OPENAI_API_KEY); `workers` requests run at once."""

    name = "vlm_ocr"

    def __init__(self, base_url: str | None = None, model: str | None = None, api_key: str | None = None,
                 instruction: str = INSTRUCTION, timeout: float = 60.0, retries: int = 3, backoff: float = 1.0,
                 max_tokens: int = 256, workers: int = 8):
        self.base_url = _env(base_url, "SOLRL_VLM_BASE_URL", "OPENAI_BASE_URL")
        self.model = _env(model, "SOLRL_VLM_MODEL")
        if not self.base_url or not self.model:
            raise ValueError("reward vlm_ocr needs base_url and model (e.g. base_url=http://localhost:8000/v1, "
                             "model=Qwen/Qwen2.5-VL-7B-Instruct), or $SOLRL_VLM_BASE_URL and $SOLRL_VLM_MODEL")
        if not self.base_url.startswith(("http://", "https://")):
            raise ValueError(f"reward vlm_ocr: base_url {self.base_url!r} is no http(s) address; write it whole, e.g. "
                             "http://localhost:8000/v1")
        self.api_key = _env(api_key, "SOLRL_VLM_API_KEY", "OPENAI_API_KEY")
        self.instruction, self.max_tokens, self.workers = instruction, max_tokens, workers
        self.request = {"timeout": timeout, "retries": retries, "backoff": backoff}

    def transcribe(self, image_uint8) -> str:
        content = [{"type": "text", "text": self.instruction},
                   {"type": "image_url", "image_url": {"url": png_data_url(image_uint8)}}]
        payload = {"model": self.model, "messages": [{"role": "user", "content": content}],
                   "temperature": 0, "max_tokens": self.max_tokens}
        return parse_transcription(chat_completion(self.base_url, payload, self.api_key, **self.request))

    def check_prompts(self, prompts) -> None:
        check_ocr_prompts(prompts)

    def check_endpoint(self) -> str:
        """One short text-only request, no retries: an unreachable server, a wrong model name or key fails
        here in one line (chat_client.ChatError) instead of in the first iteration."""
        payload = {"model": self.model, "messages": [{"role": "user", "content": "Reply with OK."}],
                   "temperature": 0, "max_tokens": 1}
        chat_completion(self.base_url, payload, self.api_key, timeout=self.request["timeout"], retries=1)
        return f"vlm_ocr: {self.base_url} answered as model {self.model!r}"

    def score(self, images, prompts):
        targets = [ocr_target(p) for p in prompts]  # fail before any request on a prompt without quotes
        with ThreadPoolExecutor(max_workers=max(1, self.workers)) as pool:
            texts = list(pool.map(self.transcribe, to_uint8_nhwc(images)))
        return RewardResult(torch.tensor([ocr_score(t, g) for t, g in zip(texts, targets)]))
