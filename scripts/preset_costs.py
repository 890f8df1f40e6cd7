"""What each GPU preset costs, as `solrl check` estimates it, into results/preflight/preset_costs.json: per preset,
on one H100 (80 GiB) and on eight, seconds per iteration, hours for the run, GPU-hours and the peak memory.
Also the estimate held against the GPU runs it was not calibrated on (the forward of SD3.5-M and of SANA-1.6B,
results/gpu/engine_sd35m_h200_reference_layers.json), so the docs can say how far to trust it.

    python scripts/preset_costs.py            # rewrite the file (after a preset or the forecast changes)
    python scripts/preset_costs.py --check    # exit 1 if the file is not what the code gives now
    python scripts/preset_costs.py --headers  # then write each GPU preset's cost lines from the file

Nothing here is measured: every number is an estimate of the code at hand (solrl/preflight/forecast.py).
"""
from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "results" / "preflight" / "preset_costs.json"
GPUS = (1, 8)


def preset_rows() -> list[dict]:
    from solrl.config import load_config
    from solrl.precision.recipes import TORCHAO_TESTED, DeviceInfo
    from solrl.preflight import run_check

    # with the torchao solrl pins (its GPU kernels are torchao's), whatever this machine has installed; the
    # test that holds this file to the code (tests/test_preflight.py) describes the same GPU
    h100 = DeviceInfo("cuda", "NVIDIA H100 80GB HBM3", (9, 0), memory_gib=80.0, torchao=TORCHAO_TESTED[0])
    rows = []
    for path in sorted((ROOT / "configs").glob("*.yaml")):
        if path.stem.startswith("toy"):
            continue
        report = run_check(load_config(path), h100, gpus=GPUS)
        for forecast in report.forecasts:
            rows.append({"group": path.stem, "seed": None, "gpu": "H100 80GB", "gpus": forecast.gpus,
                         "prompt_groups_per_gpu": forecast.groups_per_gpu,
                         "seconds_per_iteration": round(forecast.iteration_seconds, 1),
                         "hours_training": round(forecast.train_hours, 1),
                         "hours_evaluations": None if forecast.eval_hours is None else round(forecast.eval_hours, 1),
                         "hours_run": round(forecast.hours, 1), "gpu_hours": round(forecast.hours * forecast.gpus),
                         "peak_memory_gib": round(report.memory.peak_gib, 1),
                         "gradient_checkpointing": report.plan.checkpointing})
    return rows


def check_rows() -> list[dict]:
    """The estimate's policy forward per sample against two measured ones it was not calibrated on."""
    from solrl.models.released import SANA_1600M, SD35_MEDIUM
    from solrl.preflight.flops import forward_flops
    from solrl.preflight.forecast import CALIBRATION_PEAK_TFLOPS, peak_efficiency
    from solrl.preflight.sources import Architecture, family_class, meta_transformer
    from solrl.reporting.results import load_result

    engine = load_result(ROOT / "results/gpu/engine_sd35m_h200_reference_layers.json")
    policy = next(r for r in engine["records"] if r["group"] == "lora_policy" and r["compile"] == "compiled")
    sana = [r for r in engine["records"] if r["group"] == "sana16b sol_rl iteration"][-1]
    measured = {  # seconds per sample-forward: SD3.5-M's forward at batch 24; SANA's regeneration, 8 samples x 10 steps
        "SD3.5-M, batch 24, compiled forward": (SD35_MEDIUM, 128, policy["forward_ms"] / 1000 / 24),
        "SANA-1.6B, batch 8, regeneration (second iteration)": (SANA_1600M, 32, sana["seconds_regenerate"] / 80),
    }
    rows = []
    for what, (released, side, seconds) in measured.items():
        family = family_class(released.family)
        transformer = meta_transformer(Architecture(released.transformer_class, dict(released.transformer), "", released))
        flops = forward_flops(family, transformer, (released.transformer["in_channels"], side, side), released.text_tokens)
        estimate = flops / (peak_efficiency() * CALIBRATION_PEAK_TFLOPS * 1e12)
        rows.append({"group": "calibration check", "seed": None, "what": what, "tflop_per_forward": round(flops / 1e12, 2),
                     "seconds_per_forward_estimated": round(estimate, 5), "seconds_per_forward_measured": round(seconds, 5),
                     "measured_over_estimated": round(seconds / estimate, 2)})
    return rows


def result() -> dict:
    import torch

    from solrl.precision.recipes import TORCHAO_TESTED, cpu_label
    from solrl.preflight.forecast import CALIBRATION_SOURCE, peak_efficiency

    return {
        "schema": 1,
        "title": "what each GPU preset costs on one H100 and on eight, as solrl check estimates it",
        "command": "python scripts/preset_costs.py",
        "machine": f"{cpu_label()}, torch {torch.__version__}: estimates for a described NVIDIA H100 80GB (no GPU ran)",
        "date": datetime.date.today().isoformat(),
        "source": f"estimated by solrl/preflight/forecast.py, calibrated on {CALIBRATION_SOURCE}; nothing here is measured",
        "settings": {"gpu": "NVIDIA H100 80GB, dense bf16 peak 989.4 TFLOPS (as the H200)", "train.parallel": "replicate",
                     "torchao": TORCHAO_TESTED[0],
                     "calibration_peak_efficiency": round(peak_efficiency(), 4)},
        "units": {"seconds_per_iteration": "s", "hours_run": "h", "peak_memory_gib": "GiB"},
        "records": [*preset_rows(), *check_rows()],
        "notes": "hours_run = iterations x seconds_per_iteration + every evaluation (rank 0 alone) + one compile warm-up. "
                 "The calibration check rows hold the estimate against GPU runs it was not fitted to: read the forecast "
                 "as optimistic for smaller models and batches.",
    }


# the reference each GPU preset follows and the GPUs it runs on (read in its launcher, 2026-12-07)
REFERENCE_GPUS = {
    "qwen": (4, "VeRL-Omni examples/diffusionnft_trainer/run_qwen_image_ocr_lora.sh; they also serve its VLM judge"),
    "default": (8, "NVlabs/Sana train_scripts/sol_rl/run_*_single_node_8gpu.sh; configs/sol_rl/*.py: n_gpus=8"),
}
HEADER_START = "# Cost (estimates"


def _span(hours: float) -> str:
    return f"{hours:.0f} h" if hours < 48 else f"{hours / 24:.1f} days"


def header_lines(preset: str, rows: list[dict]) -> list[str]:
    """The cost lines of a preset's header comment, from its rows of the results file."""
    one = next(r for r in rows if r["gpus"] == 1)
    eight = next(r for r in rows if r["gpus"] == 8)
    gpus, where = REFERENCE_GPUS["qwen" if preset.startswith("qwen") else "default"]
    groups = one["prompt_groups_per_gpu"]
    return [
        f"{HEADER_START} by `solrl check`; results/preflight/preset_costs.json): the reference runs on {gpus} GPUs",
        f"# ({where}),",
        f"# where this preset's {groups} prompt groups per iteration are {groups // gpus} per GPU.",
        f"# One H100 or H200: about {one['seconds_per_iteration'] / 60:.0f} min per iteration and {_span(one['hours_run'])} "
        f"for the whole run; eight: about {eight['seconds_per_iteration'] / 60:.1f} min",
        f"# and {_span(eight['hours_run'])}; peak {one['peak_memory_gib']:.0f} GiB per GPU. One GPU keeps the recipe "
        "(the same global batch,",
        "# longer iterations; train.checkpoint_minutes keeps the work) or scales it down: "
        f"train.prompts_per_iter={groups // gpus}",
        f"# (each update sees {gpus}x fewer samples: noisier steps) and a smaller eval.max_prompts (cheaper evaluations);",
        "# what each choice changes: docs/presets.md#what-a-preset-costs.",
    ]


def write_headers(result: dict) -> list[Path]:
    """Each GPU preset's cost lines, replaced (or added just above its first setting); returns the files changed."""
    changed = []
    for path in sorted((ROOT / "configs").glob("*.yaml")):
        rows = [r for r in result["records"] if r["group"] == path.stem]
        if not rows:
            continue
        lines = path.read_text().splitlines()
        first = next(i for i, line in enumerate(lines) if not line.startswith("#"))
        start = next((i for i, line in enumerate(lines[:first]) if line.startswith(HEADER_START)), first)
        new = lines[:start] + header_lines(path.stem, rows) + lines[first:]
        if new != lines:
            path.write_text("\n".join(new) + "\n")
            changed.append(path)
    return changed


def main(argv=None) -> int:
    import tempfile

    import huggingface_hub.constants

    from solrl.reporting.results import dump_result

    # the released sizes, whatever this machine's Hugging Face cache holds (as the tests read them)
    huggingface_hub.constants.HF_HUB_CACHE = tempfile.mkdtemp(prefix="solrl_empty_hub_")

    parser = argparse.ArgumentParser(description="estimate every GPU preset's cost into " + str(OUT.relative_to(ROOT)))
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed file differs from the code's estimates")
    parser.add_argument("--headers", action="store_true", help="write each GPU preset's cost lines from the committed file")
    args = parser.parse_args(argv)
    if args.headers:
        changed = write_headers(json.loads(OUT.read_text()))
        print(f"rewrote the cost lines of {len(changed)} preset(s)" + "".join(f"\n  {p.relative_to(ROOT)}" for p in changed))
        return 0
    new = result()
    if args.check:
        old = json.loads(OUT.read_text())
        stale = [k for k in ("records", "settings", "source") if old.get(k) != json.loads(dump_result(new)).get(k)]
        print(f"{OUT.relative_to(ROOT)}: " + (f"stale ({', '.join(stale)}); rerun python scripts/preset_costs.py" if stale else "current"))
        return 1 if stale else 0
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(dump_result(new))
    print(f"wrote {OUT.relative_to(ROOT)}: {len(new['records'])} records")
    return 0


if __name__ == "__main__":
    sys.exit(main())
