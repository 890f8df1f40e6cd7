"""solrl: RL post-training of text-to-image flow models (Sol-RL two-stage exploration, DiffusionNFT)."""
__version__ = "0.1.0"
