"""Rewards only the tests use, registered by conftest in the pytest process and by _worker_site/sitecustomize.py in
the `solrl` processes the tests start (torchrun's workers run `-m solrl`, which knows only the built-in rewards)."""
from solrl.rewards.base import REWARDS, Reward, RewardResult


@REWARDS.register("test_brightness")
class Brightness(Reward):
    """Mean brightness: cheap, defined for any prompt, and continuous in the pixels, so runs whose
    weights differ by float rounding get rewards that differ by as little (a JPEG's byte count or a
    verifier's verdict jumps instead)."""
    name = "test_brightness"

    def score(self, images, prompts):
        return RewardResult(images.mean(dim=(1, 2, 3)))
