"""Closed forms of the acceptance length, the Medusa draft and the LPU draft chips (issue 44, survivors of the
seed-44 mutation sample in speculation/acceptance.py, drafters.py and speedup.py)."""

from __future__ import annotations

import numpy as np
import pytest

from specplan.costs.gemm import gemm_cost
from specplan.costs.precision import resolve_precision
from specplan.profiles.registry import load_hardware, load_model
from specplan.speculation import Acceptance, evaluate, evaluate_kw
from specplan.speculation.acceptance import al_from_per_position, simulate_al
from specplan.speculation.drafters import DraftInput, draft_medusa
from specplan.speculation.speedup import profile_tree_tokens
from specplan.model.deployment import Deployment


def test_positions_past_the_list_repeat_the_last_probability():
    """p = (0.9, 0.5) at D = 4: 1 + 0.9 + 0.9·0.5 + 0.9·0.5² + 0.9·0.5³ = 2.6875 (the last p, 0.5, repeats)."""
    assert float(al_from_per_position([0.9, 0.5], 4)) == pytest.approx(2.6875, rel=1e-12)


def test_simulated_al_on_its_default_seed_matches_the_closed_form():
    """The Monte Carlo of the draft/verify loop on its default seed: AL = 1 + 0.8 + 0.8·0.6 = 2.28 within 4 SE."""
    mean, se = simulate_al([0.8, 0.6], n_iter=50_000)
    assert abs(mean - 2.28) < 4 * se and se > 0


def test_medusa_draft_is_d_passes_of_resblock_and_head():
    """Medusa without a heads profile (one ResBlock a head) on Llama-3.1-8B, TP 1, batch 4, D = 3: the heads run
    in one pass, priced as D x (an h x h GEMM + an h x vocab GEMM) of 4 rows in the LM head's dtype."""
    m, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    prec = resolve_precision(m, hw)
    inp = DraftInput(m, hw, 1, prec, np.array(4.0), np.array(3.0), np.array(1024.0))
    w = prec.w("lm_head")
    one = (gemm_cost(hw, 4.0, 4096, 4096, w, prec.compute).time_s
           + gemm_cost(hw, 4.0, 128256, 4096, w, prec.compute).time_s)
    assert float(draft_medusa(inp).time_s) == pytest.approx(3.0 * float(one), rel=1e-12)


def test_a_tree_scaled_to_another_depth_keeps_one_node_per_depth():
    """A profile's tree is rescaled as 1 + (T − 1)·D / depth, but never below 1 + D (the root and one node a depth):
    T = 4 at depth 6 gives 4 at D = 6 by proportion, floored at 7."""
    acc = Acceptance(kind="rate", alpha=0.7, d_max=6.0, tree_tokens=4)
    assert float(profile_tree_tokens(acc, 6)) == 7.0
    assert float(profile_tree_tokens(acc, 3)) == 4.0  # round(1 + 3·3/6) = round(2.5) = 2 -> floor 4


def test_lpu_one_token_draft_gets_its_own_chips():
    """Llama-3.2-1B drafting one token for Llama-3.1-8B on Groq-3 LPUs (0.5 GB SRAM a chip): the draft's weights
    and KV need chips beyond the target's, D = 1 as any D >= 1."""
    kw = dict(batch=1, context_len=4096, mechanism="external", acceptance=Acceptance.from_rate(0.7),
              draft_model="llama-3.2-1b")
    for d in (1, 2):
        r = evaluate_kw("llama-3.1-8b", "groq-3-lpu", draft_len=d, **kw)
        chips = np.ceil(float(r["memory_total_bytes"]) / 0.5e9)
        assert float(r["draft_devices"]) == chips - float(r["target_devices"]) > 0, d


def test_a_launch_bound_baseline_step_launches_only_the_targets_kernels():
    """An engine whose kernel launches (1 ms each, no host time, no overlap) dwarf the GPU: the D = 0 step is its
    kernels x 1 ms, the target's kernels only (no draft runs without speculation)."""
    from specplan.model.step import step_time
    from specplan.profiles.registry import load_engine

    eng = load_engine("vllm").model_copy(update=dict(
        graph_launch_s=1e-3, eager_launch_s=1e-3, host_step_s=0.0, host_per_seq_s=0.0, step_gap_s=0.0,
        eager_step_s=0.0, overlap_scheduler=False))
    r = evaluate(Deployment("llama-3.1-8b", "h100-sxm", engine=eng), batch=4, context_len=1024)
    kernels = step_time("llama-3.1-8b", "h100-sxm", 1, 4, 1, 1024).kernels
    assert float(np.asarray(r["engine_baseline_step_s"])) == pytest.approx(kernels * 1e-3, rel=1e-12)
