"""SGLang's adaptive speculative decoding, reproduced line for line from the `sglang` 0.5.23 wheel.

Source: sglang/srt/speculative/adaptive_spec_params.py (AdaptiveStepSlot, AdaptiveSpeculativeParams,
DEFAULT_ADAPTIVE_CONFIG, _load_adaptive_config), its callers sglang/srt/speculative/adaptive_runtime_state.py
(AdaptiveController: activate_step_by_batch before each decode forward, on_verify_complete after each verify),
sglang/srt/speculative/eagle_worker_v2.py (forward_batch_generation routes `batch.seq_lens.shape[0]`; at
steps = 0 the target still verifies one token and the draft still runs its draft-extend) and
sglang/srt/managers/scheduler_components/batch_result_processor.py (feeds num_correct_drafts_per_req =
accept_len − 1 per request, batch_size = len(batch.reqs)); the initial steps when --speculative-num-steps is not
given: candidate_steps[len // 2] of the union of all slots (arg_groups/speculative_hook.py,
_init_adaptive_speculative_params).

The config file is SGLang's own JSON (--speculative-adaptive-config): integer-string batch keys, each with
candidate_steps and optional ema_alpha / update_interval / warmup_batches / up_hysteresis / down_hysteresis /
ceiling_coeff; non-digit top-level keys are defaults merged under every slot ({**cfg, **entry}).
"""

from __future__ import annotations

import bisect
import json
import math
from pathlib import Path

import numpy as np

from specplan.core.records import record
from specplan.core.errors import SpecplanError

SOURCE = "sglang 0.5.23, sglang/srt/speculative/adaptive_spec_params.py"

DEFAULT_ADAPTIVE_CONFIG: dict[str, dict] = {
    "1": {"candidate_steps": [1, 3, 5, 7], "up_hysteresis": 0.0, "down_hysteresis": -0.25, "ceiling_coeff": 0},
    "8": {"candidate_steps": [0, 1, 3], "up_hysteresis": 0.0, "down_hysteresis": 0.0, "ceiling_coeff": 0},
    "32": {"candidate_steps": [0, 1], "up_hysteresis": 0.0, "down_hysteresis": 0.0, "ceiling_coeff": 0},
    "64": {"candidate_steps": [0], "up_hysteresis": 0.0, "down_hysteresis": 0.0, "ceiling_coeff": 0},
}
KNOBS = ("candidate_steps", "ema_alpha", "update_interval", "warmup_batches", "down_hysteresis", "up_hysteresis",
         "ceiling_coeff")


@record
class SlotConfig:
    """One batch-size slot of SGLang's config, the top-level knobs merged under it (AdaptiveStepSlot's defaults
    where neither gives one): candidate steps, EMA weight, update interval and warm-up (batches), hysteresis
    down / up, EMA ceiling coefficient."""

    candidate_steps: object = None
    ema_alpha: object = 0.2
    update_interval: object = 5
    warmup_batches: object = 10
    down_hysteresis: object = -0.25
    up_hysteresis: object = 0.0
    ceiling_coeff: object = 0


def load_config(path: str | None) -> dict[int, SlotConfig]:
    """{batch key: slot} from SGLang's JSON or its defaults, the top-level knobs merged under every slot; one-line
    errors."""
    where = path or "sglang default config"
    if path is None:
        cfg = DEFAULT_ADAPTIVE_CONFIG
    else:
        from specplan.core.loader import read_json  # bounded: size, nesting, duplicate keys, finite numbers

        p = Path(path)
        if not p.is_file():
            raise SpecplanError(f"sglang config: no such file '{path}'")
        cfg = read_json(p, "sglang config", mapping=False)
        if not isinstance(cfg, dict):
            raise SpecplanError(f"{path}: expected a JSON object of batch-size keys")
    entries: dict[int, SlotConfig] = {}
    knobs = {k: v for k, v in cfg.items() if not str(k).isdigit()}
    for key, entry in cfg.items():
        if not str(key).isdigit():
            if key not in KNOBS:
                raise SpecplanError(f"{where}: unknown key '{key}' (known: batch-size keys and {', '.join(KNOBS)})")
            continue
        if not isinstance(entry, dict):
            raise SpecplanError(f"{where}: BS {key}: expected an object with candidate_steps")
        steps = SlotConfig(**{k: v for k, v in entry.items() if k in KNOBS}).candidate_steps
        if (not isinstance(steps, list) or not steps
                or not all(isinstance(s, int) and not isinstance(s, bool) and 0 <= s <= 256 for s in steps)):
            raise SpecplanError(f"{where}: BS {key}: candidate_steps must be a list of non-negative ints (<= 256), "
                                f"got {steps!r}"[:300])
        for k, v in entry.items():
            if k not in KNOBS:
                raise SpecplanError(f"{where}: BS {key}: unknown field '{k}' (known: {', '.join(KNOBS)})")
            if k != "candidate_steps" and not isinstance(v, (int, float)):
                raise SpecplanError(f"{where}: BS {key}: {k} must be a number, got {v!r}")
        entries[int(key)] = SlotConfig(**{**knobs, **entry})
    if not entries:
        raise SpecplanError(f"{where}: needs at least one integer-string BS key, e.g. "
                            '{"1": {"candidate_steps": [1, 3, 7]}}')
    return entries


def candidate_union(entries: dict[int, SlotConfig]) -> list[int]:
    """resolve_candidate_steps_from_config: union of every slot's candidate steps."""
    return sorted({s for e in entries.values() for s in e.candidate_steps})


class AdaptiveStepSlot:
    """SGLang's per-batch-size slot: EMA of accepted drafts, warm-up, update interval, hysteresis."""

    def __init__(self, initial_steps: int, cfg: SlotConfig):
        candidates = sorted(set(cfg.candidate_steps))
        self.candidate_steps = candidates
        self.ema_alpha = cfg.ema_alpha
        self.update_interval = cfg.update_interval
        self.warmup_batches = cfg.warmup_batches
        self.down_hysteresis = cfg.down_hysteresis
        self.up_hysteresis = cfg.up_hysteresis
        self.ceiling_coeff = cfg.ceiling_coeff
        if initial_steps in self.candidate_steps:
            self.current_steps = initial_steps
        else:
            self.current_steps = self.candidate_steps[len(self.candidate_steps) // 2]
        self.ema_accept_len = float(self.current_steps - 1)
        self._batch_count = 0

    def update(self, num_correct_drafts_per_req) -> bool:
        """Feed one verify's accepted draft counts; True if the steps changed."""
        n = len(num_correct_drafts_per_req)
        if not n:
            return False
        if self.current_steps > 0:
            batch_avg = float(np.sum(num_correct_drafts_per_req)) / n
            self.ema_accept_len = (1 - self.ema_alpha) * self.ema_accept_len + self.ema_alpha * batch_avg
        self._batch_count += 1
        if self._batch_count <= self.warmup_batches:
            return False
        if (self._batch_count - self.warmup_batches) % self.update_interval != 0:
            return False
        return self._recompute_params()

    def _recompute_params(self) -> bool:
        old_steps = self.current_steps
        current_idx = self.candidate_steps.index(old_steps)
        old_idx = current_idx
        if old_steps == 0:  # probe the smallest positive step after a zero-step interval
            current_idx = min(current_idx + 1, len(self.candidate_steps) - 1)
            target = self.candidate_steps[current_idx]
            if target > 0 and self.ema_accept_len < 0:
                self.ema_accept_len = float(target - 1)
            return self._apply(old_steps, target)
        while current_idx > 0:
            prev_step = self.candidate_steps[current_idx - 1]
            drop_threshold = 0.5 if prev_step == 0 else prev_step - 0.5
            drop_threshold += self.down_hysteresis
            if self.ema_accept_len <= drop_threshold:
                current_idx -= 1
            else:
                break
        if not current_idx < old_idx:
            while current_idx < len(self.candidate_steps) - 1:
                rise_threshold = self.candidate_steps[current_idx] - 0.5 + self.up_hysteresis
                if self.ema_accept_len > rise_threshold:
                    current_idx += 1
                else:
                    break
        target = self.candidate_steps[current_idx]
        if self.ceiling_coeff > 0:  # the EMA ceiling only caps downward moves
            ceiling = max(1, math.ceil(self.ema_accept_len * self.ceiling_coeff))
            if target > ceiling and target <= old_steps:
                while current_idx > 0 and self.candidate_steps[current_idx] > ceiling:
                    current_idx -= 1
                target = self.candidate_steps[current_idx]
        return self._apply(old_steps, target)

    def _apply(self, old_steps: int, target: int) -> bool:
        if target != old_steps:
            self.current_steps = target
            return True
        return False


class AdaptiveSpeculativeParams:
    """Routes a batch size to its slot: pad to the CUDA-graph batch size, then the closest slot key below."""

    def __init__(self, initial_steps: int | None = None, cfg_path: str | None = None,
                 cuda_graph_bs: list[int] | None = None):
        entries = load_config(cfg_path)
        if initial_steps is None:
            union = candidate_union(entries)
            initial_steps = union[len(union) // 2]
        elif initial_steps not in candidate_union(entries):
            raise SpecplanError(f"sglang: initial steps {initial_steps} is not in the config's candidate_steps "
                                f"{candidate_union(entries)}")
        self.initial_steps = initial_steps
        self._bs_list = sorted(entries)
        self._slots = {bs: AdaptiveStepSlot(initial_steps, e) for bs, e in sorted(entries.items())}
        self._cuda_graph_bs = sorted(cuda_graph_bs) if cuda_graph_bs else None
        self.slot_steps = {bs: sorted(set(e.candidate_steps)) for bs, e in entries.items()}

    def get_steps_for_batch(self, batch_size: int) -> int:
        """Draft steps the worker activates for a decode batch of this size."""
        return self._route(batch_size).current_steps

    def on_verify_complete(self, num_correct_drafts_per_req, batch_size: int) -> int | None:
        """Feed a verify's accepted counts to the batch's slot; the new steps if it switched."""
        slot = self._route(batch_size)
        return slot.current_steps if slot.update(num_correct_drafts_per_req) else None

    def _route(self, batch_size: int) -> AdaptiveStepSlot:
        padded = batch_size
        if self._cuda_graph_bs is not None:
            idx = bisect.bisect_left(self._cuda_graph_bs, batch_size)
            padded = self._cuda_graph_bs[idx] if idx < len(self._cuda_graph_bs) else batch_size
        idx = bisect.bisect_right(self._bs_list, padded) - 1
        return self._slots[self._bs_list[max(0, idx)]]
