"""kvsim/engine/fleet/deployment.py: the checks only a pool's model and hardware reveal. A KV tier too small
for one KV block (of the replica's GPUs together) is refused naming the key, the capacity and the block."""

from __future__ import annotations

import pytest

from kvsim.engine.simulation import Simulation
from kvsim.errors import KvsimError
from kvsim.scenario import load_scenario

BLOCK_MB = 16 * 131_072 / 1e6  # llama-3-8b, bf16, 16 tokens a block: 2.10 MB (per GPU at TP 1)


def tiers(*tier: str, tp: int = 1) -> Simulation:
    return Simulation(load_scenario(None, ["kv.prefix_cache=hash", f"kv.tiers=[{', '.join(tier)}]",
                                           f"parallelism.tensor_parallel_size={tp}",
                                           "simulation.requests=5"]))


@pytest.mark.parametrize("tier", ["{medium: cpu, capacity_gb: 0}", "{medium: cpu, capacity_gb: 0.002}",
                                  "{medium: ssd, capacity_gb: 0.002}",
                                  "{medium: remote, capacity_gb: 0.002, bandwidth_gbps: 10}",
                                  "{medium: remote, capacity_gb: 0.002, bandwidth_gbps: 10, shared: true}"])
def test_a_tier_that_holds_no_block_is_refused(tier):
    with pytest.raises(KvsimError) as err:
        tiers(tier)
    gb = "0" if "capacity_gb: 0}" in tier else "0.002"
    assert str(err.value) == f"kv.tiers.0.capacity_gb: {gb} GB holds no KV block of {BLOCK_MB:.2f} MB"


def test_the_block_a_tier_must_hold_is_the_replicas_over_its_tensor_parallel_gpus():
    """At TP 2 a block is two shards of 1.05 MB: 0.0021 GB holds one block, 0.002 GB only one shard."""
    assert tiers("{medium: cpu, capacity_gb: 0.0021}").tier_media == ["cpu"]
    with pytest.raises(KvsimError, match=r"^kv.tiers.0.capacity_gb: 0.002 GB holds no KV block of 2.10 MB$"):
        tiers("{medium: cpu, capacity_gb: 0.002}", tp=2)
    with pytest.raises(KvsimError, match=r"^kv.tiers.1.capacity_gb: 0.001 GB holds no KV block"):
        tiers("{medium: cpu, capacity_gb: 1}", "{medium: ssd, capacity_gb: 0.001}")
