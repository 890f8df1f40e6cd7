"""Seeds derived from (run seed, iteration, purpose): every random draw of a run is a pure function
of where it happens, so resumed, re-split or re-ordered work repeats it exactly."""
from __future__ import annotations

import hashlib


def derived_seed(run_seed: int, iteration: int, purpose: str) -> int:
    """A 63-bit seed, independent across purposes (SHA-256, not arithmetic, so nearby inputs do not correlate)."""
    digest = hashlib.sha256(f"{run_seed}:{iteration}:{purpose}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)
