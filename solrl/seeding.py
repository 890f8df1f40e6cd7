"""Seeds derived from (run seed, iteration, purpose): every random draw of a run is a pure function
of where it happens, so resumed, re-split or re-ordered work repeats it exactly."""
from __future__ import annotations

import hashlib


def seed_from(text: str) -> int:
    """A 63-bit seed from a name (SHA-256, not arithmetic, so nearby names do not correlate)."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little") & ((1 << 63) - 1)


def derived_seed(run_seed: int, iteration: int, purpose: str) -> int:
    """A seed independent across (run seed, iteration, purpose)."""
    return seed_from(f"{run_seed}:{iteration}:{purpose}")
