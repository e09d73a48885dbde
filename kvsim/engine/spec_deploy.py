"""Speculative decoding in one pool's replica configuration (`speculative` set): the draft, the KV capacity
with it, the cost model with its forwards, and each replica's decode sizing with its own seeded draws."""

from __future__ import annotations

from typing import Any

import numpy as np

from kvsim.cost.base import CostModel
from kvsim.cost.factory import build_cost_model
from kvsim.cost.speculative import SpeculativeCost
from kvsim.engine.spec_sizing import SpecSizing
from kvsim.errors import KvsimError
from kvsim.scenario import Scenario
from kvsim.specs.catalog import get_model
from kvsim.specs.footprint import Capacity
from kvsim.specs.hardware import HardwareSpec
from kvsim.specs.model import ModelSpec
from kvsim.speculative.acceptance import expected_accepted, position_rates
from kvsim.speculative.config import DRAFT_OVERHEAD_S
from kvsim.speculative.draft import build_draft
from kvsim.speculative.memory import with_draft

SEED_TAG = 0x5BEC
"""Mixed into the scenario seed for the acceptance draws (a stream of their own)."""


class SpecDeployment:
    """The draft of a pool (kvsim/speculative/draft.py) and what it changes: `capacity` (the target's with
    the draft's weights and KV in it), `cost_model`, `new_sizing` (one per replica, seeded by its index)."""

    def __init__(self, sc: Scenario, model: ModelSpec, capacity: Capacity, tp: int) -> None:
        cfg = sc.speculative
        self.sc = sc
        self.cfg = cfg
        self.k = cfg.num_speculative_tokens
        self.lookahead = 0 if cfg.method == "ngram" else self.k
        """vLLM's num_lookahead_tokens: slots the drafter writes its proposals into (none for ngram)."""
        self.rates = position_rates(cfg)
        draft_model = None
        if cfg.model is not None:
            try:
                draft_model = get_model(cfg.model)
            except KvsimError as exc:
                raise KvsimError(f"speculative.model: {exc}") from None
        self.draft = build_draft(cfg, model, sc.kv.dtype, tp, draft_model)
        self.capacity_without = capacity
        self.capacity = with_draft(capacity, self.draft, model.name)
        self._replicas = 0

    def cost_model(self, target: CostModel, hw: HardwareSpec, bytes_per_block: float) -> SpeculativeCost:
        """The target's cost model plus the draft's k forwards (a model of the same `cost.model` built on
        the draft's spec; none for ngram)."""
        spec, step_spec = self.draft.spec, self.draft.step_spec
        draft = None if spec is None else build_cost_model(self.sc, spec, hw, bytes_per_block)
        step = None if step_spec is None else build_cost_model(self.sc, step_spec, hw, bytes_per_block)
        overhead = DRAFT_OVERHEAD_S if self.cfg.draft_overhead_s is None else self.cfg.draft_overhead_s
        return SpeculativeCost(target, draft, self.k, overhead, step)

    def new_sizing(self, block_size: int) -> SpecSizing:
        """A replica's decode sizing; the i-th replica draws from default_rng([seed, SEED_TAG, i])."""
        rng = np.random.default_rng([self.sc.simulation.seed, SEED_TAG, self._replicas])
        self._replicas += 1
        return SpecSizing(self.k, self.rates, rng, block_size, self.lookahead)

    def describe(self) -> dict[str, Any]:
        """The configuration's part of meta `speculative`."""
        d, cap, base = self.draft, self.capacity, self.capacity_without
        return {
            "method": self.cfg.method,
            "num_speculative_tokens": self.k,
            "lookahead_slots": self.lookahead,
            "acceptance_rates": list(self.rates),
            "expected_accepted_per_step": expected_accepted(self.rates),
            "draft_model": None if d.spec is None else d.spec.name,
            "draft_derived": d.derived,
            "draft_params": d.params,
            "draft_weight_bytes": d.weight_bytes,
            "draft_kv_bytes_per_token": d.kv_bytes_per_token,
            "draft_kv_layers": d.kv_layers,
            "kv_capacity_tokens": cap.tokens,
            "kv_capacity_tokens_without_draft": base.tokens,
            "kv_capacity_tokens_lost": base.tokens - cap.tokens,
        }
