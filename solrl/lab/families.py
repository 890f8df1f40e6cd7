"""The families of the convergence study: the toy presets each one runs (the paper's four and sol_rl with an
adaptive pool), and variants of one's own (`--variant NAME FAMILY OVERRIDE...`)."""
from __future__ import annotations

from ..config import load_config


FAMILY_PRESETS = {
    "diffusionnft": "configs/toy_diffusionnft.yaml",
    "naive_scaling": "configs/toy_naive_scaling.yaml",
    "naive_quant": "configs/toy_naive_quant.yaml",
    "sol_rl": "configs/toy_sol_rl.yaml",
    "sol_rl_adaptive": "configs/toy_sol_rl.yaml",  # beyond the paper: FAMILY_OVERRIDES
}


# variants of a preset: the overrides that make them (before the command line's own)
FAMILY_OVERRIDES = {"sol_rl_adaptive": ["rollout.adaptive=true"]}


DEFAULT_FAMILIES = ["diffusionnft", "naive_scaling", "naive_quant", "sol_rl"]  # the paper's four


def parse_variant(tokens: list[str]) -> tuple[str, tuple[str, list[str]]]:
    """`--variant NAME FAMILY OVERRIDE...` -> (NAME, (FAMILY, overrides)): a named family of one's own, for
    example a fixed pool size beside the preset's (`sol_rl_n96 sol_rl rollout.explore_seeds=96`)."""
    if len(tokens) < 3:
        raise ValueError(f"--variant {' '.join(tokens)}: give a name, the family it varies and at least one "
                         "override, e.g. --variant sol_rl_n96 sol_rl rollout.explore_seeds=96")
    name, family, overrides = tokens[0], tokens[1], list(tokens[2:])
    if name in FAMILY_PRESETS:
        raise ValueError(f"--variant {name}: that name is a shipped family; name the variant otherwise, e.g. {name}_v")
    if family not in FAMILY_PRESETS:
        raise ValueError(f"--variant {name}: unknown family {family!r}; choose from {', '.join(FAMILY_PRESETS)}")
    bad = [o for o in overrides if "=" not in o]
    if bad:
        raise ValueError(f"--variant {name}: {bad[0]!r} is not an override; write key=value, e.g. rollout.explore_seeds=96")
    return name, (family, overrides)


def family_config(family: str, overrides: list[str], variants: dict | None = None):
    """A family's preset with its variant's overrides, then `overrides`. `variants` (parse_variant) names
    further families: one of FAMILY_PRESETS with overrides of their own, applied before `overrides`."""
    base, own = (variants or {}).get(family, (family, []))
    return load_config(FAMILY_PRESETS[base], [*FAMILY_OVERRIDES.get(base, []), *own, *overrides])
