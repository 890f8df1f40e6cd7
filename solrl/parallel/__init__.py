"""Several processes (torchrun): the world and its collectives (distributed.py), FSDP2 sharding (sharding.py)."""
from .distributed import World, current_world, gather_objects, shard, sum_gradients

__all__ = ["World", "current_world", "gather_objects", "shard", "sum_gradients"]
