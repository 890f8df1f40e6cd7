"""Several processes (torchrun): the world and its collectives (distributed.py), FSDP2 sharding (sharding.py)."""
from .distributed import World, init_world, launched_by_torchrun, merge_metric_sums

__all__ = ["World", "init_world", "launched_by_torchrun", "merge_metric_sums"]
