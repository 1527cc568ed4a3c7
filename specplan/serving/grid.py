"""What the serving model returns: steady-state serving over a grid of loads and configurations, as one record."""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from specplan.core.records import FieldMapping


@dataclass(frozen=True, eq=False)
class ServingGrid(FieldMapping):
    """Steady-state serving at each grid point (arrays over the loads and draft lengths asked; counts are the
    instance's, or the decode pool's per decode instance): TPOT, TTFT (mean, p50, p90), latency and iteration
    (s), tokens/s per user and per GPU over all GPUs of the deployment, decode batch, requests/s, concurrency
    (clients, or in flight at an open-loop rate), the admission wait (s), acceptance length, whether it fits in
    memory and is stable; the engine's running cap and the requests whose KV fits; devices. Fields a mode does not
    produce are None: the saturation rate (open loop), the weights and KV capacity (bytes, aggregated), DP ranks
    (data-parallel attention), the prefill pool's seconds per prompt, utilization, KV transfer (s), pools (x, y)
    and whether the prefill pool binds (disaggregated). Read fields as attributes; it is also a read-only mapping
    over the fields its mode produces (scripts written against the dict answer)."""

    tpot_s: object = None
    ttft_s: object = None
    ttft_p50_s: object = None
    ttft_p90_s: object = None
    request_latency_s: object = None
    tokens_per_s_per_user: object = None
    tokens_per_s_per_gpu: object = None
    decode_batch: object = None
    iteration_s: object = None
    acceptance_length: object = None
    requests_per_s: object = None
    concurrency: object = None
    stable: object = None
    admission_wait_s: object = None
    fits: object = None
    saturation_requests_per_s: object = None
    prefill_tokens_per_step: object = None
    devices: object = None
    running_cap: object = None
    kv_cap_requests: object = None
    kv_cap_draft: object = None
    spec_cap: object = None
    weights_bytes: object = None
    capacity_bytes: object = None
    dp_ranks: object = None
    prefill_s: object = None
    prefill_utilization: object = None
    kv_transfer_s: object = None
    pools: object = None
    prefill_bound: object = None

    def _names(self) -> list[str]:
        return [f.name for f in fields(self) if getattr(self, f.name) is not None]

    def at(self, i: int, shape: tuple, per_point_fields: tuple) -> dict:
        """Field values at index i of the grid's last axis (arrays broadcast to `shape`; scalars as they are),
        for the fields named (the others are one value per pool column, taken by the caller)."""
        return {k: (v if np.ndim(v) == 0 else np.broadcast_to(v, shape)[..., i])
                for k in per_point_fields if (v := getattr(self, k)) is not None}
