import os
import time
from pathlib import Path

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# One thread per test process: the tests' models are tiny, so a second thread buys little and spins at every barrier
# (measured on the 2-core AVX2 EPYC under load: a 4-iteration trainer run took 55 CPU seconds with two threads, 26 with
# one); the suite's processes (pytest-xdist's two workers, torchrun's ranks) share the cores instead.
torch.set_num_threads(int(os.environ.get("SOLRL_TEST_THREADS", "1")))

import _test_rewards  # noqa: E402,F401  (registers test_brightness; subprocesses get it from tests/_worker_site)

WORKER_SITE = Path(__file__).parent / "_worker_site"
# torch.compile's backend for the compile tests: aot_eager by default (dynamo and AOTAutograd, eager kernels), inductor
# (C++ kernels, minutes on a first run) instead with --inductor, as CI runs them (tests/test_compile.py says why)
COMPILE_BACKENDS = [pytest.param("aot_eager", marks=pytest.mark.stands_in_for_inductor),
                    pytest.param("inductor", marks=pytest.mark.inductor)]


def subprocess_env(**extra):
    """The environment of a `solrl` process a test starts: offline, one thread (two ranks share two cores), this
    checkout's solrl, and the test rewards (tests/_worker_site/sitecustomize.py)."""
    root = Path(__file__).resolve().parent.parent
    return {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1",
            "PYTHONPATH": os.pathsep.join([str(root), str(WORKER_SITE)]), **extra}


def pytest_addoption(parser):
    group = parser.getgroup("solrl order", "run the tests in another order, to show none depends on another's leftovers")
    group.addoption("--reverse", action="store_true", help="run the collected tests last to first")
    group.addoption("--shuffle", type=int, default=None, metavar="SEED", help="run the tests in an order shuffled by SEED")
    group.addoption("--inductor", action="store_true",
                    help="run the compile tests on inductor instead of aot_eager: torch.compile's C++ kernels, built from "
                         "scratch on a first run (minutes on a 2-core CPU; CI runs them)")
    group.addoption("--cpu-durations", type=int, default=None, metavar="N",
                    help="list the N tests that took the most CPU seconds (this process and the processes it waited for, "
                         "setup and call): a cost that other programs on the machine do not inflate, as they do wall time")
    group.addoption("--cpu-log", default=None, metavar="PATH",
                    help="append each test's CPU and wall seconds (setup and call) to PATH as it finishes, tab-separated")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    item._cpu_start, item._wall_start = _cpu_seconds(), time.perf_counter()
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    yield
    cpu, wall = _cpu_seconds() - item._cpu_start, time.perf_counter() - item._wall_start
    item.user_properties.append(("cpu_seconds", round(cpu, 3)))
    if item.config.getoption("--cpu-log"):
        with open(item.config.getoption("--cpu-log"), "a") as log:
            log.write(f"{item.nodeid}\t{cpu:.2f}\t{wall:.2f}\n")


def _cpu_seconds() -> float:
    import resource

    own, waited = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + waited.ru_utime + waited.ru_stime


def pytest_terminal_summary(terminalreporter, config):
    count = config.getoption("--cpu-durations")
    if not count:
        return
    seen = {}
    for reports in terminalreporter.stats.values():
        for report in reports:
            for name, value in getattr(report, "user_properties", ()):
                if name == "cpu_seconds" and getattr(report, "when", "") == "call":
                    seen[report.nodeid] = value
    terminalreporter.write_sep("=", f"slowest {count} tests by CPU seconds (setup + call)")
    for nodeid, value in sorted(seen.items(), key=lambda kv: -kv[1])[:count]:
        terminalreporter.write_line(f"{value:8.1f}s cpu  {nodeid}")
    terminalreporter.write_line(f"{sum(seen.values()):8.1f}s cpu in all {len(seen)} tests")


def pytest_collection_modifyitems(config, items):
    """Tests marked inductor run only with `--inductor`, their aot_eager stand-ins only without it. `--reverse` and
    `--shuffle SEED` reorder whole files and the tests inside them alike, so a test that only passes after another (a
    shared run extended by an earlier test, a registry filled by an earlier import) fails."""
    skipped_marker = "stands_in_for_inductor" if config.getoption("--inductor") else "inductor"
    left_out = [item for item in items if item.get_closest_marker(skipped_marker)]
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = [item for item in items if not item.get_closest_marker(skipped_marker)]
    if config.getoption("--reverse"):
        items.reverse()
    elif config.getoption("--shuffle") is not None:
        import random

        random.Random(config.getoption("--shuffle")).shuffle(items)


@pytest.fixture(scope="session")
def pipeline_dirs(tmp_path_factory):
    """Each diffusers family's tiny random pipeline, built and saved once per session (on first use)."""
    from solrl.testing.random_pipelines import build_random_pipeline

    built = {}

    def get(family):
        if family not in built:
            built[family] = tmp_path_factory.mktemp(family)
            build_random_pipeline(family, built[family])
        return built[family]

    return get


@pytest.fixture(scope="session")
def toy_policy():
    from solrl.models import load_policy

    return load_policy("toy")


def make_adapted_policy(model_dir, perturb: bool = True):
    """The tiny toy policy with `default` and `old` LoRA adapters on the attention projections;
    with `perturb`, both adapters get different random weights so each changes the output."""
    from solrl.models import load_policy
    from solrl.models.lora import OLD, TRAINED, adapter_params, add_policy_adapters, lora_config

    policy = load_policy("toy", str(model_dir))
    add_policy_adapters(policy.transformer, lora_config(4, 8, "gaussian", ["to_q", "to_k", "to_v", "to_out.0"]))
    if perturb:
        with torch.no_grad():
            for name in (TRAINED, OLD):
                for p in adapter_params(policy.transformer, name).values():
                    p.add_(0.05 * torch.randn_like(p))
    policy.transformer.eval()
    return policy


class ShellPayload:
    """What a hostile checkpoint carries: unpickling it runs `touch MARKER`, so a test sees whether it ran."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def assert_same_training_state(a: dict, b: dict) -> None:
    """Two loaded checkpoints hold bitwise the same adapters (trained and old) and AdamW moments."""
    for key in ("lora_default", "lora_old"):
        for name, value in a[key].items():
            assert torch.equal(value, b[key][name]), (key, name)
    for index, moments in a["optimizer"]["state"].items():
        for name, value in moments.items():
            assert torch.equal(value, b["optimizer"]["state"][index][name]), (index, name)


def write_pickled_checkpoint(path, state):
    """A checkpoint as solrl wrote them before safetensors (torch.save), with its seal: whoever writes a
    checkpoint can write its seal too."""
    import hashlib

    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(state, path)
    path.with_name(path.name + ".sha256").write_text(f"{hashlib.sha256(path.read_bytes()).hexdigest()}  {path.name}\n")
    return path


@pytest.fixture()
def adapted_policy(tiny_toy_dir):
    return make_adapted_policy(tiny_toy_dir)


@pytest.fixture(scope="session")
def tiny_toy_dir(tmp_path_factory):
    """A random-weight toy transformer small enough for fast trainer tests (2 layers, width 32)."""
    from diffusers import SD3Transformer2DModel

    from solrl.models.toy import TOY_TRANSFORMER_CONFIG

    torch.manual_seed(0)
    config = dict(TOY_TRANSFORMER_CONFIG, num_layers=2, attention_head_dim=16, num_attention_heads=2, caption_projection_dim=32)
    path = tmp_path_factory.mktemp("tiny_toy")
    SD3Transformer2DModel(**config).save_pretrained(str(path))
    return path


def linear_rounding_bound(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """Elementwise bound on how far two fp32 evaluations of x @ weight.T + bias may differ when they only sum in
    another order (a 2-D product against a batched one, another CPU's kernel blocking): each is within
    (n + 1) eps of the exact sum of |terms| (Higham's gamma_n, plus the bias add), so the two within twice that."""
    terms = x.abs() @ weight.abs().t() + (0 if bias is None else bias.abs())
    return 2 * (x.shape[-1] + 1) * torch.finfo(torch.float32).eps * terms
