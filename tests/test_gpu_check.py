"""bench/gpu_check.py's CPU side: argument parsing and the dry run that sizes the released architectures."""
import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "bench" / "gpu_check.py"


@pytest.fixture(scope="module")
def gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("arch, low, high", [("sd35m", 2.0e9, 2.6e9), ("sana16b", 1.5e9, 1.7e9)])
def test_dry_run_sizes_the_released_transformer(gpu_check, arch, low, high, tmp_path):
    out = tmp_path / "g.json"
    result = gpu_check.main(["--dry-run", "--arch", arch, "--out", str(out)])
    assert low < result["plan"]["transformer_parameters"] < high
    assert not out.exists()  # a dry run writes nothing


def test_tiny_mode_targets_the_cpu_sized_model(gpu_check):
    args = gpu_check.parse_args(["--tiny", "--device", "cpu", "--recipes", "int8"])
    assert (args.family, args.resolution, args.vae_levels) == ("sd3", 32, 2)
    assert gpu_check.parameter_count(args.family, args.transformer) < 1e6
