"""Prompts: the sets a run reads (`prompts.py`), and the public prompt sets of the papers, pinned
(`sets.py`), verified (`verify.py`) and fetched (`fetch.py`) by `solrl data fetch`."""
from .prompts import (
    TOY_SPLITS,
    PromptSet,
    check_prompt_lengths,
    load_prompt_records,
    load_prompts,
    prompt_order,
    prompts_for_iteration,
)

__all__ = ["TOY_SPLITS", "PromptSet", "check_prompt_lengths", "load_prompt_records", "load_prompts", "prompt_order",
           "prompts_for_iteration"]
