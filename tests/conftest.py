import os

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
torch.set_num_threads(min(2, torch.get_num_threads()))


def _register_test_rewards():
    from solrl.rewards.base import REWARDS, Reward, RewardResult

    @REWARDS.register("test_brightness")
    class Brightness(Reward):
        """Mean brightness: cheap, defined for any prompt, and continuous in the pixels, so runs whose
        weights differ by float rounding get rewards that differ by as little (a JPEG's byte count or a
        verifier's verdict jumps instead)."""
        name = "test_brightness"

        def score(self, images, prompts):
            return RewardResult(images.mean(dim=(1, 2, 3)))


_register_test_rewards()


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
