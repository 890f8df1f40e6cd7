"""solrl: RL post-training of text-to-image flow models (Sol-RL two-stage exploration, DiffusionNFT)."""
import logging

__version__ = "0.1.0"


class _CudaOnly(logging.Filter):
    """torchao (Blackwell's NVFP4 / MXFP8 kernels) ships CUDA-built extensions; importing it, which diffusers
    does whenever it is installed, warns on a CPU-only torch that they do not load, and diffusers and
    torch's pytree add two more lines. Those kernels never run without CUDA: there the warnings are noise."""

    def filter(self, record: logging.LogRecord) -> bool:
        import torch

        return torch.cuda.is_available()


for _name in ("torchao", "torch.utils._pytree", "diffusers.quantizers.torchao.torchao_quantizer"):
    logging.getLogger(_name).addFilter(_CudaOnly())
