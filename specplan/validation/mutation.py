"""Mutation testing of the model code with cosmic-ray's operators (issue 26): does a test notice a one-token change?

A thin wrapper over the `cosmic-ray` library (the `dev` extra): cosmic-ray enumerates every mutation site of a
module (an operator such as `+` -> `-`, `<` -> `<=`, a number n -> n + 1, `and` -> `or`, a loop run zero times) and
writes the mutated source; this module picks a seeded sample of the sites, applies each mutant in a scratch copy of
the repository, runs the tests related to the mutated module (`TESTS`, most specific first, `-x`), and records
killed (a test failed), survived (all passed), timeout (counted as killed, as cosmic-ray does) or incompetent (the
mutant does not import). Survivors are listed in docs/validation/mutation.md per module, each with the reason it is
equivalent (`EQUIVALENT`, keyed by module and the mutated line) or "not classified".

    python scripts/mutation.py --modules serving,speculation,planning,adaptive --sample 300 --seed 1
    python scripts/mutation.py --modules adaptive --sample 20 --seed 1 --results /tmp/m.json  # resumable
    python scripts/mutation.py --report-only --results docs/validation/mutation.json          # rewrite the md

The scratch copy (a temporary folder holding the git-tracked files) means an interrupted run never leaves a
mutated file in the working tree. Runs are resumable: results are appended to the JSON after every mutant and a
mutant already in it is not run again.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from specplan.core.records import record
from specplan.core.errors import SpecplanError

ROOT = Path(__file__).resolve().parents[2]

# Model-code groups (the "costs, step, memory, parallel, speculation, serving, capacity/planning, adaptive").
GROUPS: dict[str, tuple[str, ...]] = {
    "costs": ("specplan/costs/roofline.py", "specplan/costs/gemm.py", "specplan/costs/attention.py",
              "specplan/costs/comm.py", "specplan/costs/moe.py", "specplan/costs/shapes.py"),
    "model": ("specplan/model/step.py", "specplan/model/memory.py", "specplan/model/parallel.py"),
    "speculation": ("specplan/speculation/acceptance.py", "specplan/speculation/drafters.py",
                    "specplan/speculation/speedup.py", "specplan/speculation/guidelines.py",
                    "specplan/speculation/round.py"),
    "serving": ("specplan/serving/prefill.py", "specplan/serving/aggregated.py", "specplan/serving/disaggregated.py",
                "specplan/serving/workload.py"),
    "planning": ("specplan/planning/recommend.py", "specplan/planning/capacity.py", "specplan/planning/sweep.py",
                 "specplan/planning/recommend_serving.py", "specplan/planning/cost.py",
                 "specplan/planning/launch/emit.py"),
    "adaptive": ("specplan/adaptive/simulator.py", "specplan/adaptive/policies.py",
                 "specplan/adaptive/sglang_policy.py", "specplan/adaptive/costs.py", "specplan/adaptive/bounds.py",
                 "specplan/adaptive/metrics.py", "specplan/adaptive/trace.py", "specplan/adaptive/workload.py"),
}

# Tests related to each module, most specific (and fastest to fail) first. A missing file is skipped, so the map
# survives renames in other branches; a module with no existing file falls back to its folder's tests.
_SERVING = ("tests/serving/test_serving_fixed_points.py", "tests/serving/test_littles_law.py",
            "tests/serving/test_draft_prefill_ttft.py",
            "tests/serving/test_serving_model.py", "tests/serving/test_engine_profiles.py")
_SPEC = ("tests/speculation/test_drafter_closed_forms.py", "tests/speculation/test_engine_draft_steps.py",
         "tests/speculation/test_drafter_shapes.py",
         "tests/speculation/test_speedup.py",
         "tests/speculation/test_physics_review.py", "tests/speculation/test_review_fixes.py",
         "tests/speculation/test_properties.py")
_ADAPTIVE = ("tests/adaptive/test_adaptive_by_hand.py", "tests/adaptive/test_simulator_closed_forms.py",
             "tests/adaptive/test_adaptive_sglang.py", "tests/adaptive/test_adaptive_positions.py",
             "tests/adaptive/test_adaptive.py")
_BY_HAND = "tests/costs/test_shapes_comm_moe_by_hand.py"
_PLAN = "tests/planning/test_planning_by_hand.py"
_MODEL_BY_HAND = "tests/model/test_step_memory_by_hand.py"
TESTS: dict[str, tuple[str, ...]] = {
    "specplan/costs/roofline.py": ("tests/costs/test_hand_counts.py", "tests/costs/test_gemm.py"),
    "specplan/costs/gemm.py": ("tests/costs/test_gemm.py", "tests/costs/test_hand_counts.py"),
    "specplan/costs/attention.py": ("tests/costs/test_attention.py", "tests/costs/test_mla_family.py",
                                    "tests/costs/test_hand_counts.py"),
    "specplan/costs/comm.py": (_BY_HAND, "tests/costs/test_comm_moe.py"),
    "specplan/costs/moe.py": (_BY_HAND, "tests/costs/test_moe_rank_skew.py", "tests/costs/test_comm_moe.py",
                              "tests/model/test_parallel.py"),
    "specplan/costs/shapes.py": (_BY_HAND, "tests/costs/test_hand_counts.py", "tests/model/test_step.py"),
    "specplan/model/step.py": (_MODEL_BY_HAND, "tests/model/test_step.py", "tests/model/test_step_new_kinds.py",
                               "tests/model/test_dp_rounding.py", "tests/model/test_parallel.py"),
    "specplan/model/memory.py": (_MODEL_BY_HAND, "tests/model/test_dp_rounding.py", "tests/model/test_parallel.py",
                                 "tests/model/test_step.py", "tests/model/test_step_new_kinds.py"),
    "specplan/model/parallel.py": (_MODEL_BY_HAND, "tests/model/test_dp_rounding.py", "tests/model/test_parallel.py"),
    "specplan/speculation/acceptance.py": ("tests/speculation/test_drafter_closed_forms.py",
                                           "tests/speculation/test_acceptance.py",
                                           "tests/speculation/test_properties.py"),
    "specplan/speculation/drafters.py": _SPEC,
    "specplan/speculation/speedup.py": _SPEC,
    "specplan/speculation/guidelines.py": ("tests/speculation/test_guidelines_recommend.py",
                                           "tests/speculation/test_physics_review.py"),
    "specplan/serving/prefill.py": ("tests/serving/test_prefill_chunks.py", "tests/serving/test_prefill.py")
    + _SERVING,
    "specplan/serving/aggregated.py": _SERVING,
    "specplan/serving/disaggregated.py": ("tests/serving/test_prefill_saturation_boundary.py",
                                          "tests/serving/test_decode_pools_saturation.py") + _SERVING,
    "specplan/speculation/round.py": ("tests/speculation/test_round_tree_steps.py", "tests/speculation/test_round.py")
    + _SPEC,
    "specplan/planning/cost.py": (_PLAN, "tests/planning/test_energy_per_accepted_token.py",
                                  "tests/planning/test_cost.py", "tests/planning/test_objective_cli.py"),
    "specplan/planning/launch/emit.py": (_PLAN, "tests/planning/test_launch_dp_counts.py",
                                         "tests/planning/test_launch.py", "tests/planning/test_saved_answer_numbers.py",
                                         "tests/planning/test_launch_cli.py"),
    "specplan/serving/workload.py": _SERVING,
    "specplan/planning/recommend.py": (_PLAN, "tests/speculation/test_guidelines_recommend.py",
                                       "tests/planning/test_user_facing.py"),
    "specplan/planning/capacity.py": ("tests/planning/test_capacity_closed_forms.py",
                                      "tests/planning/test_capacity.py", "tests/planning/test_capacity_serving.py",
                                      "tests/planning/test_user_facing.py"),
    "specplan/planning/sweep.py": (_PLAN, "tests/planning/test_sweep.py",),
    "specplan/planning/recommend_serving.py": ("tests/planning/test_deployment_budget.py", _PLAN,
                                               "tests/planning/test_deployment_counts.py",
                                               "tests/planning/test_serving_planner.py",
                                               "tests/planning/test_capacity_serving.py",
                                               "tests/planning/test_d_by_load.py",
                                               "tests/planning/test_user_facing.py") + _SERVING,
    **{m: _ADAPTIVE for m in GROUPS["adaptive"]},
}

# Operators sampled: arithmetic and comparison swaps, unary minus, boolean, numbers ±1, break/continue, a loop run
# zero times. Left out: bitwise/shift/pow/mod targets (a float model has none to mean), `is` comparisons, variable
# insertion/replacement and exception/decorator removal (mostly incompetent or untestable mutants).
_ARITH = ("Add", "Sub", "Mul", "Div", "FloorDiv")
_CMP = ("Eq", "NotEq", "Lt", "LtE", "Gt", "GtE")
OPERATORS: tuple[str, ...] = (
    tuple(f"core/ReplaceBinaryOperator_{a}_{b}" for a in _ARITH for b in _ARITH if a != b)
    + tuple(f"core/ReplaceComparisonOperator_{a}_{b}" for a in _CMP for b in _CMP if a != b)
    + ("core/ReplaceUnaryOperator_USub_UAdd", "core/ReplaceUnaryOperator_Delete_Not", "core/AddNot",
       "core/ReplaceTrueWithFalse", "core/ReplaceFalseWithTrue", "core/ReplaceAndWithOr", "core/ReplaceOrWithAnd",
       "core/ReplaceBreakWithContinue", "core/ReplaceContinueWithBreak", "core/NumberReplacer",
       "core/ZeroIterationForLoop")
)

@record
class Equivalent:
    """Why a survivor is no gap in the tests: `why`, the argument that no input tells the mutant from the code;
    with `tolerance`, where some input does, by how much at most ("equivalent within tolerance")."""

    why: str
    tolerance: str | None = None


_M = "specplan/"
# Survivors read by hand, keyed by (module, the mutated line before, the line after), both stripped as
# changed_line gives them: another mutation of the same line is a new key, read again. Strict entries first, then
# those equivalent only within a tolerance (it says where they differ and by how much).
EQUIVALENT: dict[tuple[str, str, str], Equivalent] = {
    (_M + "adaptive/bounds.py", "c = np.zeros(1) if at_zero else costs.ctx_grid",
     "c = np.zeros( 2) if at_zero else costs.ctx_grid"): Equivalent(
        "at_zero's one context-0 row becomes two identical rows; the only caller (clairvoyant_dp) reads row 0"),
    (_M + "adaptive/costs.py", "toks = np.unique(np.round(np.geomspace(1, max(prefill_budget, 2), 32)))",
     "toks = np.unique(np.round(np.geomspace(1, max(prefill_budget, 1), 32)))"): Equivalent(
        "differs only at a 1-token prefill budget, where the grid [1] and [1, 2] price the only possible step "
        "(1 token) the same"),
    (_M + "serving/disaggregated.py", "grid = np.unique(np.concatenate([np.arange(1.0, min(top, 64.0) + 1.0),",
     "grid = np.unique(np.concatenate([np.arange(1.0, min(top, 63.0) + 1.0),"): Equivalent(
        "the geometric part of the grid starts at min(top, 64) on the next line, so batch 64 stays in the grid and "
        "np.unique gives the same grid for every top (tests/serving/test_littles_law.py "
        "test_disaggregated_decode_table_holds_every_whole_batch_up_to_64 checks the grid at 63-64)"),
    (_M + "planning/recommend.py",
     "max_batch = None if not np.isfinite(at(r.max_batch)) else int(min(at(r.max_batch), 1e9))",
     "max_batch = None if not np.isfinite(at(r.max_batch)) else int(min(at(r.max_batch), 999999999.0))"): Equivalent(
        "a cap of 1e9 or 999,999,999 on the largest batch: batches are bounded by 2^24 (core/limits.py MAX_BATCH) and "
        "memory, so the cap never binds"),
    (_M + "speculation/drafters.py",
     "return DraftCost(t, _active(d) * np.ones_like(t), fixed_bytes=fixed, per_seq_bytes=per_seq,",
     "return DraftCost(t, _active(d) / np.ones_like(t), fixed_bytes=fixed, per_seq_bytes=per_seq,"): Equivalent(
        "x * ones and x / ones broadcast to the same shape with the same values"),
    (_M + "speculation/guidelines.py", "cb = int(np.asarray(cb).reshape(-1)[0])",
     "cb = int(np.asarray(cb).reshape(-1)[ -1])"): Equivalent(
        "the compute-bound D depends on the batch only, and the diagnostics g1_near gets hold one batch (recommend "
        "indexes its row, predict prices one batch): the first and last elements are the same number"),
    (_M + "serving/aggregated.py",
     "alone = float(prefill_s(model, hw, tp, wl.isl, precision=prec, engine=eng)) if wl.osl == 1 else 0.0",
     "alone = float(prefill_s(model, hw, tp, wl.isl, precision=prec, engine=eng)) if wl.osl <= 1 else 0.0"):
        Equivalent("a Workload's OSL is a whole number >= 1 (its __post_init__ refuses anything else): == 1 and <= 1 "
                   "agree"),
    (_M + "planning/recommend_serving.py",
     "ranking=Ranking(top=1 if units is None else 10 ** 9),",
     "ranking=Ranking(top= 2 if units is None else 10 ** 9),"): Equivalent(
        "an aggregated layout reads the best of the ranked rows (_best_unit: the most tokens/s/GPU, its replicas "
        "fixed by TP), which is the first of them, sorted; a second row below it changes nothing"),
    (_M + "planning/capacity.py", "Workload(isl, osl, concurrency=1.0).check(m)",
     "Workload(isl, osl, concurrency= 2.0).check(m)"): Equivalent(
        "a Workload built only to check ISL + OSL against the model's context: any concurrency >= 1 checks the same"),
    (_M + "serving/disaggregated.py", "wait = np.where(rho < 1.0, rho * s_p / (2.0 * (1.0 - rho)), np.inf)",
     "wait = np.where(rho <= 1.0, rho * s_p / (2.0 * (1.0 - rho)), np.inf)"): Equivalent(
        "at rho = 1 the M/D/1 wait rho S / (2 (1 - rho)) is itself infinite (no guard on 1 - rho since issue 44; "
        "tests/serving/test_prefill_saturation_boundary.py prices rho = 1 exactly)"),
    (_M + "adaptive/bounds.py", "top = costs.b_max if b_reach is None else max(1, min(b_reach, costs.b_max))",
     "top = costs.b_max if b_reach is None else max( 0, min(b_reach, costs.b_max))"): Equivalent(
        "b_reach comes from reach_batch, at least 1 (each of its caps is >= 1), so max(0, .) and max(1, .) agree"),
    (_M + "adaptive/metrics.py", 'tokens_per_s_per_gpu=tokens / dur / devices if dur > 0 else float("nan"),',
     'tokens_per_s_per_gpu=tokens / dur / devices if dur != 0 else float("nan"),'): Equivalent(
        "a run's duration is a difference of sorted event times, never negative: > 0 and != 0 agree"),
    (_M + "adaptive/costs.py", 'rho = float(np.asarray(r.rho).flat[0])',
     'rho = float(np.asarray(r.rho).flat[ 1])'): Equivalent(
        "the grid's first two elements are D = 0 and D = 1 at one batch and context, where every drafter's rho is "
        "the same (a layer ratio, DFlash's divided by max(D, 1))"),
    (_M + "planning/sweep.py", "chunk_points: int = 1 << 18,", "chunk_points: int = 2 << 18,"): Equivalent(
        "the grid is priced in chunks of this many points to bound memory; the numbers do not depend on the chunk"),
    (_M + "adaptive/costs.py", "out[:, d] |= (i < len(self.buckets)) & (np.asarray(self.buckets + (0,))[i] == bk)",
     "out[:, d] |= (i <= len(self.buckets)) & (np.asarray(self.buckets + (0,))[i] == bk)"): Equivalent(
        "at i = len(buckets) the padded entry is 0, which equals no batch (>= 1): the extra index adds nothing"),
    (_M + "adaptive/metrics.py", 'dec = s.batch > 0', 'dec = s.batch != 0'): Equivalent(
        "a step's batch is a count, never negative: > 0 and != 0 agree"),
    (_M + "planning/sweep.py",
     "evaluate_kw(model, hw, tp=1, batch=1, context_len=1024, draft_len=max(1, max_d), mechanism=mechanism,",
     "evaluate_kw(model, hw, tp=1, batch= 2, context_len=1024, draft_len=max(1, max_d), mechanism=mechanism,"):
        Equivalent("applicable() asks only whether the mechanism evaluates (a missing module, draft model or "
                   "acceptance raises the same at any batch); the numbers are discarded"),
    (_M + "speculation/speedup.py",
     'raise SpecplanError(f"acceptance length: AL must be <= 1 + D, got {np.max(al - d - 1) + 1:g} above")',
     'raise SpecplanError(f"acceptance length: AL must be <= 1 + D, got {np.max(al - d * 1) + 1:g} above")'):
        Equivalent("the message of a guard no Acceptance reaches: Acceptance.al clips AL to [1, 1 + D] (a "
                   "defensive check)"),
    (_M + "speculation/speedup.py",
     'raise SpecplanError(f"acceptance length: AL must be <= 1 + D, got {np.max(al - d - 1) + 1:g} above")',
     'raise SpecplanError(f"acceptance length: AL must be <= 1 + D, got {np.max(al - d / 1) + 1:g} above")'):
        Equivalent("the same unreachable guard's message (Acceptance.al clips AL to [1, 1 + D])"),
    (_M + "serving/aggregated.py",
     "ttft = np.where(np.isfinite(ttft), np.maximum(ttft, c / np.maximum(x, 1e-300)), c / np.maximum(x, 1e-300))",
     "ttft = np.where(np.isfinite(ttft), np.maximum(ttft, c / np.maximum(x, 1e-300)), c / np.maximum(x, 1.0))"):
        Equivalent("the fallback for a non-finite TTFT is not taken: the closed loop's bisection keeps X below the "
                   "prefill's saturation rate (hi = 1 / p_s, never reached), where the M/D/1 TTFT is finite"),
    (_M + "planning/recommend_serving.py", "one = memory_usage(m, hw, tp, 1, isl + osl, prec)",
     "one = memory_usage(m, hw, tp, 2, isl + osl, prec)"): Equivalent(
        "the deployment search reads this call's max_batch, weights and capacity, none of which depends on the "
        "batch it is given"),
    (_M + "serving/disaggregated.py", "i = np.clip(np.searchsorted(grid, bt) - 1, 0, len(grid) - 2)",
     "i = np.clip(np.searchsorted(grid, bt) - 1, 0, len(grid) + 2)"): Equivalent(
        "bt is clipped to [grid[0], grid[-1]] just before, so searchsorted gives at most len - 1 and i at most "
        "len - 2: the upper clip never binds"),
    (_M + "speculation/acceptance.py",
     "return tuple(at_depth[i] / at_depth[i - 1] if at_depth[i - 1] > 0 else 0.0 for i in range(1, depth + 1))",
     "return tuple(at_depth[i] / at_depth[i - 1] if at_depth[i - 0] > 0 else 0.0 for i in range(1, depth + 1))"):
        Equivalent("the chance of reaching depth i never exceeds that of depth i - 1, so the two guards differ only "
                   "where depth i is 0, where both give 0 (the range's 1 -> 0 on this line is another key: killed)"),
    (_M + "costs/moe.py", "return np.minimum(float(num_experts // ep), n * top_k / ep)",
     "return np.minimum(float(num_experts / ep), n * top_k / ep)"): Equivalent(
        "every EP the model prices has passed Layout.check (model/parallel.py), which refuses an EP that does not "
        "divide the experts: num_experts // ep and / ep are the same whole number"),
    (_M + "serving/aggregated.py",
     "prefill_alone_gpu_s: float = 0.0  # GPU seconds of one prompt's prefill steps without decode rows (OSL 1)",
     "prefill_alone_gpu_s: float = 1.0  # GPU seconds of one prompt's prefill steps without decode rows (OSL 1)"):
        Equivalent("a default no table uses: GpuTables is built in one place (gpu_tables), which always passes it"),
    (_M + "serving/aggregated.py",
     "ttft = np.where(np.isfinite(ttft), np.maximum(ttft, c / np.maximum(x, 1e-300)), c / np.maximum(x, 1e-300))",
     "ttft = np.where(np.isfinite(ttft), np.maximum(ttft, c / np.maximum(x, 1e-300)), c / np.maximum(x, -1.0))"):
        Equivalent("X is the lower end of a bisection on (0, saturation] that moves up from 0 at its first step for "
                   "any C >= 1 (mid x TTFT(mid) <= C there), so X > 1e-300 and max(X, 1e-300) = max(X, -1) = X"),
    (_M + "serving/disaggregated.py",
     "t_cap_u = at_whole(cap_u)[1] if workload.osl > 1 else np.full(du.shape, np.nan)",
     "t_cap_u = at_whole(cap_u)[1] if workload.osl > 0 else np.full(du.shape, np.nan)"): Equivalent(
        "OSL is a whole number >= 1, so the two differ only at OSL 1, where t_cap's one reader (decode_cap in "
        "_pool_split) takes its `inf` branch (no decode) and never reads it"),
    (_M + "planning/capacity.py", "tps = dec // lay.gpus * b.tps", "tps = dec / lay.gpus * b.tps"): Equivalent(
        "the line runs only for layouts whose GPUs divide the decode GPUs (`dec % lay.gpus` skips the others just "
        "before), where // and / give the same whole number"),
    (_M + "adaptive/policies.py",
     "def __init__(self, text: str, acc_err: float = 0.0, time_err: float = 0.0, use_slo: bool = True):",
     "def __init__(self, text: str, acc_err: float = -1.0, time_err: float = 0.0, use_slo: bool = True):"):
        Equivalent("acc_err is read only as `self.acc_err > 0` (add noise to α): 0 and -1 both add none"),
    (_M + "adaptive/simulator.py", "thr = np.concatenate([thr + relax * (1.0 - thr), [0.0]])",
     "thr = np.concatenate([thr + relax * (1.0 - thr), [ -1.0]])"): Equivalent(
        "the sentinel threshold after the last token stops every run: a uniform u in [0, 1) is below neither 0 "
        "nor -1"),
    (_M + "adaptive/simulator.py", "span = np.maximum(wl.osl[s.ids] - 1, 1)",
     "span = np.maximum(wl.osl[s.ids] - 1, 0)"): Equivalent(
        "s.ids holds decoding requests only, and an OSL-1 request never joins them (_join finishes it at its first "
        "token): OSL - 1 >= 1 for every id, where max(., 1) and max(., 0) agree"),
    (_M + "planning/sweep.py",
     "if model.num_q_heads % int(t) == 0 and int(t) <= max(hw.scaleup_domain, 1)))",
     "if model.num_q_heads % int(t) == 0 and int(t) <= max(hw.scaleup_domain, 0)))"): Equivalent(
        "HardwareProfile.scaleup_domain is at least 1 (its field is ge=1): max(domain, 1) = max(domain, 0)"),
    (_M + "adaptive/policies.py",
     "def __init__(self, text: str, acc_err: float = 0.0, time_err: float = 0.0, use_slo: bool = True):",
     "def __init__(self, text: str, acc_err: float = 0.0, time_err: float = 0.0, use_slo: bool = False):"):
        Equivalent("a default no call uses: ModelBased's one constructor call (make_policy) passes its slo option"),
    (_M + "speculation/guidelines.py", "if best_d == 0:", "if best_d <= 0:"): Equivalent(
        "best_d is the draft length the search picked, an index into the step's per-D arrays, never negative"),
    (_M + "planning/recommend_serving.py", "if out and keys[out[-1][-1]] == k:",
     "if out and keys[out[-1][- 0]] == k:"): Equivalent(
        "out[-1] is a run of indices whose keys are all equal: its first and last name the same key"),
    (_M + "planning/launch/emit.py", 'if s["kind"] == "object" and isinstance(v, dict) and "keys" in s:',
     'if s["kind"] >= "object" and isinstance(v, dict) and "keys" in s:'): Equivalent(
        "the flag lists' specs that carry 'keys' are of kind 'object' (and DynamoGraphDeployment, which sorts below "
        "'object'): == and >= pick the same specs"),
    (_M + "planning/recommend_serving.py", 'if mode == "disagg" and 2 * tp > gpus:',
     'if mode >= "disagg" and 2 * tp > gpus:'): Equivalent(
        "the search's modes are 'agg' and 'disagg' (recommend --mode maps auto to both), and 'agg' sorts below "
        "'disagg': == and >= agree on both"),
    # equivalent within a tolerance: some input tells them apart, by at most what `tolerance` says
    (_M + "serving/aggregated.py", "if d.ndim >= 1 and d.size > 1 and only_draft_len_varies(spec):",
     "if d.ndim >= 1 and d.size <= 1 and only_draft_len_varies(spec):"): Equivalent(
        "a cache: a grid of draft lengths is priced once per distinct D and spread back, or priced at every point; "
        "the same prices either way (tests/serving/test_tables_per_distinct_d.py compares them)",
        "relative 1e-12 (the same float operations on arrays of another shape)"),
    (_M + "serving/disaggregated.py", "grid = np.unique(np.concatenate([np.arange(1.0, min(top, 64.0) + 1.0),",
     "grid = np.unique(np.concatenate([np.arange(1.0, min(top, 65.0) + 1.0),"): Equivalent(
        "batch 65 joins the decode table's whole batches: between 64 and the next geometric point the iteration is "
        "then priced exactly instead of interpolated linearly; elsewhere (and whenever the geometric part already "
        "holds 65) nothing changes",
        "the table's interpolation error there: at most 0.21 % of TPOT and requests/s (measured on Llama-3.1-8B, "
        "Qwen3-30B-A3B, Llama-3.3-70B, H100, vLLM, ISL 1024, OSL 256 and 2048, C 62-72 beside C 1024)"),
    (_M + "serving/aggregated.py", "over = mid * np.nan_to_num(ttft_at(mid, others), posinf=1e30) > c",
     "over = mid * np.nan_to_num(ttft_at(mid, others), posinf=1e30) >= c"): Equivalent(
        "the OSL-1 closed loop's bisection on X: > and >= differ only where X x TTFT(X) equals C exactly at a "
        "midpoint, which then moves the other end of the bracket",
        "one halving of a bracket halved 2 x BISECTION_STEPS times: relative 2^-60 in X"),
    (_M + "adaptive/policies.py", "a = np.clip(a + view.rng.normal(0.0, self.acc_err, a.shape), 0.0, 1.0)",
     "a = np.clip(a - view.rng.normal(0.0, self.acc_err, a.shape), 0.0, 1.0)"): Equivalent(
        "the policy's α estimate error is a zero-mean normal: adding or subtracting it draws from the same "
        "distribution",
        "another sample of the same noise: outputs move within their sampling noise"),
    (_M + "speculation/acceptance.py", "if al >= 1.0 + at_d - 1e-12:", "if al >= 1.0 + at_d / 1e-12:"): Equivalent(
        "the shortcut for AL = 1 + D only saves the bisection, which converges to the same alpha = 1",
        "alpha within 2^-100 of 1"),
    (_M + "planning/capacity.py",
     "if best is None or (row.gpus, -per) < (best.gpus, -best.tokens_per_s_per_replica):",
     "if best is None or (row.gpus, -per) <= (best.gpus, -best.tokens_per_s_per_replica):"): Equivalent(
        "< and <= differ only when two TPs give the same GPU count and exactly the same tokens/s per replica",
        "0 in GPUs and tokens/s; at such a float tie the later TP is named"),
    (_M + "speculation/acceptance.py",
     "accepted = np.cumprod(rng.random((n_iter, p.size)) < p, axis=1).sum(axis=1) if p.size else np.zeros(n_iter)",
     "accepted = np.cumprod(rng.random((n_iter, p.size)) <= p, axis=1).sum(axis=1) if p.size else np.zeros(n_iter)"):
        Equivalent("u < p and u <= p differ only where a uniform draw in [0, 1) equals p exactly",
                   "one accepted token more with probability 2^-53 per draw"),
    (_M + "speculation/acceptance.py",
     "def simulate_generation(probs, n_tokens: int = 10_000, seed: int = 0) -> float:",
     "def simulate_generation(probs, n_tokens: int = 9999, seed: int = 0) -> float:"): Equivalent(
        "no caller in specplan uses the default token count (the tests pass theirs): a Monte Carlo length only",
        "a caller on the default gets another Monte Carlo estimate, within its standard error (about 1 %)"),
    (_M + "adaptive/workload.py",
     "isl: int, osl: int, concentration: float = 50.0, seed: int = 0) -> dict[str, np.ndarray]:",
     "isl: int, osl: int, concentration: float = 50.0, seed: int = 1) -> dict[str, np.ndarray]:"): Equivalent(
        "ramp_workload's one caller (adaptive/report.py, the committed example) passes its own seed",
        "a caller on the default gets another sample of the same distribution"),
    (_M + "adaptive/workload.py", "rng = np.random.default_rng([seed, 2])",
     "rng = np.random.default_rng([seed, 3])"): Equivalent(
        "another independent random stream for the acceptance draws: the same distribution",
        "another sample: outputs move within their sampling noise"),
    (_M + "adaptive/simulator.py",
     "rng=np.random.default_rng([seed, 5]), eager=np.array([costs.eager_extra_s(d) for d in range(d_max + 1)]),",
     "rng=np.random.default_rng([seed, 4]), eager=np.array([costs.eager_extra_s(d) for d in range(d_max + 1)]),"):
        Equivalent("another random stream for the policies' own noise: the same distribution",
                   "another sample: outputs move within their sampling noise"),
    (_M + "serving/aggregated.py", "for _ in range(BISECTION_STEPS + 10):  # C = B + X·TTFT, increasing in B",
     "for _ in range(BISECTION_STEPS + 9):  # C = B + X·TTFT, increasing in B"): Equivalent(
        "40 or 39 halvings of [0, min(C, cap)]: B to within C·2^-39 either way",
        "relative 1e-11 in every output (the tests' tolerances are 1e-9 and up)"),
    (_M + "planning/recommend.py", "state = float(r.memory_state_bytes[i, j]) / 1e9",
     "state = float(r.memory_state_bytes[i, j]) / 999999999.0"): Equivalent(
        "GB printed to one decimal", "relative 1e-9 (the JSON answer carries it; the text rounds it away)"),
    (_M + "planning/recommend.py", "cap = float(r.memory_capacity_bytes.reshape(-1)[0]) / 1e9",
     "cap = float(r.memory_capacity_bytes.reshape(-1)[ 1]) / 1e9"): Equivalent(
        "the usable capacity per device is one number broadcast over the grid: every element is the same",
        "0 on a grid of two points or more; a one-point grid (one batch, D = 0 only) raises IndexError"),
    (_M + "speculation/drafters.py", "fixed += MARKOV_HEAD_GEMMS * h * h / tp * dtype_bytes(w)",
     "fixed += MARKOV_HEAD_GEMMS * h * h // tp * dtype_bytes(w)"): Equivalent(
        "2·h² is a whole multiple of every TP the shipped models allow (powers of two dividing their heads; h a "
        "multiple of 64): / and // give the same bytes",
        "a custom model with 2·h² not a multiple of TP: under one byte per GEMM, relative TP / (2 h²)"),
}


@record
class Site:
    """One mutant: module, cosmic-ray operator, occurrence of that operator in the module, line (1-based)."""

    module: str
    operator: str
    occurrence: int
    line: int

    @property
    def key(self) -> str:
        """A stable id within one source version."""
        return f"{self.module}:{self.operator}:{self.occurrence}"


def modules_of(groups: list[str]) -> list[str]:
    """Module paths of the named groups (one-line error for an unknown group)."""
    out: list[str] = []
    for g in groups:
        if g not in GROUPS:
            raise SpecplanError(f"--modules: unknown group '{g}' (known: {', '.join(GROUPS)})")
        out += [m for m in GROUPS[g] if (ROOT / m).is_file()]
    return out


def group_of(module: str) -> str:
    """The group a module belongs to."""
    return next((g for g, ms in GROUPS.items() if module in ms), "other")


def sites(module: str, root: Path = ROOT) -> list[Site]:
    """Every mutation site of a module under OPERATORS (cosmic-ray's enumeration, as `cosmic-ray init` does)."""
    import cosmic_ray.plugins
    from cosmic_ray.ast import ast_nodes, get_ast_from_path

    tree = get_ast_from_path(root / module)
    nodes = list(ast_nodes(tree))
    out = []
    for name in OPERATORS:
        op = cosmic_ray.plugins.get_operator(name)()
        k = 0
        for node in nodes:
            for start, _end in op.mutation_positions(node):
                out.append(Site(module, name, k, start[0]))
                k += 1
    return out


def sample(all_sites: list[Site], n: int | None, seed: int) -> list[Site]:
    """A seeded uniform sample of n sites (all of them when n is None or larger) in a seeded random order, so that
    any prefix of a run that was stopped early is itself a uniform sample."""
    ordered = sorted(all_sites, key=lambda s: (s.module, s.operator, s.occurrence))
    k = len(ordered) if n is None else min(n, len(ordered))
    return random.Random(seed).sample(ordered, k)


def sample_at(mods: list[str], n: int | None, seed: int, rev: str) -> tuple[list[Site], list[Site], dict]:
    """(every site, the seeded sample, {key: (line before, line after)}) of the modules as they were at git
    revision `rev`, the code a run's sample was drawn from: a run resumed after the code moved continues that
    sample (each mutant found again in today's code by relocate) instead of drawing another one."""
    tmp = Path(tempfile.mkdtemp(prefix="specplan-sample-"))
    try:
        for m in mods:
            src = subprocess.run(["git", "show", f"{rev}:{m}"], cwd=ROOT, capture_output=True)
            if src.returncode == 0:  # a module added since has no sites in that sample
                (tmp / m).parent.mkdir(parents=True, exist_ok=True)
                (tmp / m).write_bytes(src.stdout)
        every = [x for m in mods if (tmp / m).is_file() for x in sites(m, tmp)]
        picked = sample(every, n, seed)
        change = {}
        for x in picked:
            mt = mutated_source(x, tmp)
            change[x.key] = changed_line((tmp / x.module).read_text(encoding="utf-8"), mt) if mt else ("", "")
        return every, picked, change
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def mutated_source(site: Site, root: Path = ROOT) -> str | None:
    """The module's source with this one mutation applied (None if the operator finds nothing there)."""
    import cosmic_ray.plugins
    from cosmic_ray.mutating import mutate_code

    code = (root / site.module).read_text(encoding="utf-8")
    return mutate_code(code, cosmic_ray.plugins.get_operator(site.operator)(), site.occurrence)


def relocate(site: Site, before: str, after: str, root: Path = ROOT) -> Site:
    """The site of today's code that makes the recorded change (before -> after): of the occurrences of the same
    operator that make it, the one nearest the recorded line (a line can stand twice in a module: the recorded
    occurrence's index may now name its twin), else the recorded site (the recheck then reports it 'moved')."""
    original = (root / site.module).read_text(encoding="utf-8")

    def makes(s: Site) -> bool:
        m = mutated_source(s, root)
        return m is not None and changed_line(original, m) == (before, after)

    text = original.splitlines()
    twins = sum(1 for x in text if x.strip() == before)
    if twins <= 1 and makes(site):
        return site
    same_op = [x for x in sites(site.module, root) if x.operator == site.operator]
    found = [x for x in same_op if 0 < x.line <= len(text) and text[x.line - 1].strip() == before and makes(x)]
    found = found or [x for x in same_op if makes(x)]  # a mutation reported on another line of its statement
    return min(found, key=lambda x: abs(x.line - site.line)) if found else site


def changed_line(original: str, mutated: str) -> tuple[str, str]:
    """(original line, mutated line) of the first line that differs."""
    for a, b in zip(original.splitlines(), mutated.splitlines()):
        if a != b:
            return a.strip(), b.strip()
    return "", ""


def tests_for(module: str, root: Path = ROOT) -> list[str]:
    """Existing test files related to a module (TESTS), else the tests of its folder."""
    files = [t for t in TESTS.get(module, ()) if (root / t).is_file()]
    if files:
        return files
    folder = root / "tests" / Path(module).parent.name
    return sorted(str(p.relative_to(root)) for p in folder.glob("test_*.py"))


def scratch_copy(root: Path = ROOT) -> Path:
    """A temporary copy of the git-tracked files (plus untracked, not ignored), where mutants are applied."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=root, check=True,
                           capture_output=True).stdout.decode().split("\0")
    dst = Path(tempfile.mkdtemp(prefix="specplan-mutation-"))
    for f in filter(None, files):
        src = root / f
        if src.is_file():
            (dst / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / f)
    return dst


def run_tests(work: Path, tests: list[str], timeout_s: float) -> tuple[str, float, str]:
    """('killed' | 'survived' | 'timeout', seconds, the first failing test's node id or '') of pytest over `tests`
    in the scratch copy."""
    env = dict(os.environ, PYTHONPATH=str(work), PYTHONDONTWRITEBYTECODE="1", MPLBACKEND="Agg")
    # one process: the suite's addopts spread it over pytest-xdist workers, a cost (and no gain) for a few files
    one = ["-n", "0"] if importlib.util.find_spec("xdist") is not None else []
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", *one, *tests]
    t0 = time.monotonic()
    try:
        proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return "timeout", time.monotonic() - t0, ""
    dt = time.monotonic() - t0
    failed = re.search(r"^FAILED (\S+)", proc.stdout.decode(errors="replace"), re.M)
    # an import-time failure is noticed too (no FAILED line then)
    return ("survived" if proc.returncode == 0 else "killed"), dt, failed.group(1) if failed else ""


def _compiles(code: str) -> bool:
    try:
        compile(code, "<mutant>", "exec")
    except SyntaxError:
        return False
    return True


@dataclass
class Result:
    """The outcome of one mutant."""

    module: str
    operator: str
    occurrence: int
    line: int
    outcome: str  # killed | survived | timeout | incompetent | no-mutation
    before: str
    after: str
    seconds: float
    tests: str
    killed_by: str = ""  # the first test that failed (pytest node id), when one did


def load_results(path: Path | None) -> dict[str, dict]:
    """Results already recorded (by Site key)."""
    if path is None or not path.is_file():
        return {}
    rows = json.loads(path.read_text())["results"]
    return {f"{r['module']}:{r['operator']}:{r['occurrence']}": r for r in rows}


def load_meta(path: Path | None) -> dict | None:
    """The `meta` of a results JSON (the run's groups, sample, seed, site counts), or None."""
    if path is None or not Path(path).is_file():
        return None
    return json.loads(Path(path).read_text(encoding="utf-8")).get("meta")


def save_results(path: Path, meta: dict, rows: list[dict]) -> None:
    """Write the results JSON atomically."""
    from specplan.core.io import atomic_write_text

    atomic_write_text(path, json.dumps({"meta": meta, "results": rows}, indent=1) + "\n")


def _survivors_again(done: dict, again: set) -> tuple[list, dict]:
    """(sites to run, their recorded keys) for the recorded survivors in `again`, each found again in today's code."""
    todo, origin = [], {}
    for k, r in done.items():
        if k in again:
            site = relocate(Site(r["module"], r["operator"], r["occurrence"], r["line"]), r["before"], r["after"])
            origin[site.key] = k  # the recorded key of a site found again under another occurrence
            todo.append(site)
    return todo, origin


def _sample_todo(picked: list, done: dict, rev, change: dict, rows: list) -> tuple[list, dict]:
    """(sites to run, their sample keys) of the sample not yet done; a sample drawn at `rev` is found again in
    today's code, and a mutant whose line is gone is recorded in `rows` as no-mutation."""
    todo, origin = [], {}
    for s in (x for x in picked if x.key not in done):
        if not rev:
            todo.append(s)
            continue
        site = relocate(s, *change[s.key])  # the sample's mutant in today's code
        mt = mutated_source(site)
        if mt is None or changed_line((ROOT / s.module).read_text(encoding="utf-8"), mt) != change[s.key]:
            rows.append(asdict(Result(s.module, s.operator, s.occurrence, s.line, "no-mutation", *change[s.key],
                                      0.0, "")))  # the mutated line is gone from today's code
            continue
        origin[site.key] = s.key
        todo.append(site)
    return todo, origin


def _run_mutant(work: Path, s: Site, files: list, base_s: dict, timeout_s: float) -> dict:
    """One mutant in the scratch copy `work`: mutate, run `files` (timeout: the module's baseline-derived one, else
    `timeout_s`), restore; its Result as a dict."""
    original = (work / s.module).read_text(encoding="utf-8")
    mutated = mutated_source(s, work)
    if mutated is None:
        return asdict(Result(s.module, s.operator, s.occurrence, s.line, "no-mutation", "", "", 0.0, ""))
    before, after = changed_line(original, mutated)
    if not _compiles(mutated):
        return asdict(Result(s.module, s.operator, s.occurrence, s.line, "incompetent", before, after, 0.0, ""))
    try:
        (work / s.module).write_text(mutated, encoding="utf-8")
        outcome, dt, killer = run_tests(work, files, base_s.get(s.module, timeout_s))
    finally:
        (work / s.module).write_text(original, encoding="utf-8")
    return asdict(Result(s.module, s.operator, s.occurrence, s.line, outcome, before, after, round(dt, 1),
                         " ".join(files), killer))


def run(groups: list[str], n: int | None, seed: int, *, results: Path | None = None, timeout_s: float = 300.0,
        modules: list[str] | None = None, tests: dict[str, list[str]] | None = None, baseline: bool = False,
        recheck: bool = False, workers: int = 1, sample_rev: str | None = None, log=print) -> tuple[dict, list[dict]]:
    """Mutate a seeded sample of the groups' sites (or of `modules`) and run each module's tests (`tests`
    overrides TESTS per module): (meta, result rows). `baseline`: first check that the unmutated tests pass
    (timeout 4 x their time + 30 s; else `timeout_s`). `recheck`: run the recorded survivors again (after
    adding tests). `workers`: mutants run side by side, each worker in its own scratch copy. `sample_rev` (else
    the results' meta's): the git revision the sample is drawn from (sample_at), kept in the meta."""
    mods = modules if modules is not None else modules_of(groups)
    rev = None if recheck else sample_rev or (load_meta(results) or {}).get("sample_rev")
    if rev:
        every, picked, change = sample_at(mods, n, seed, rev)
    else:
        every = [s for m in mods for s in sites(m)]
        picked, change = sample(every, n, seed), {}
    done = load_results(results)
    again = ({k for k, r in done.items() if r["outcome"] == "survived" and not equivalence(r)
              and (r.get("now") not in ("killed", "timeout") or "::" not in r.get("now_tests", ""))}
             if recheck else set())  # not yet killed, or killed without the name of the test that did
    rows = [done[s.key] for s in picked if s.key in done and s.key not in again]
    meta = {"groups": groups, "sample": n, "seed": seed, "sites_total": len(every),
            "sites_per_module": {m: sum(s.module == m for s in every) for m in mods},
            **({"sample_rev": rev} if rev else {})}
    if recheck:  # the recorded survivors, whatever the sample of today's code is; the other rows stay as they are
        todo, origin = _survivors_again(done, again)
        rows += [r for k, r in done.items() if k not in again and r not in rows]
        meta = load_meta(results) or meta  # the run's own sample description
    else:
        todo, origin = _sample_todo(picked, done, rev, change, rows)
    if not todo:
        if results is not None and rev:
            save_results(results, meta, rows)
        return meta, rows
    import queue
    import threading

    lock, base_s, count = threading.Lock(), {}, [0]
    jobs: "queue.Queue[Site]" = queue.Queue()
    for s in todo:
        jobs.put(s)
    errors: list[BaseException] = []

    def one(work: Path, s: Site) -> dict:
        files = (tests or {}).get(s.module) or tests_for(s.module, work)
        if baseline and s.module not in base_s:  # the unmutated tests must pass, and set the timeout
            outcome, dt, _ = run_tests(work, files, 3600)
            if outcome != "survived":
                raise SpecplanError(f"mutation: the tests of {s.module} fail without a mutant ({' '.join(files)})")
            base_s[s.module] = 4.0 * dt + 30.0
        return _run_mutant(work, s, files, base_s, timeout_s)

    def worker() -> None:
        work = scratch_copy()
        try:
            while not errors:
                try:
                    s = jobs.get_nowait()
                except queue.Empty:
                    return
                row = one(work, s)
                k0 = origin.get(s.key, s.key)
                if k0 != s.key and k0 not in again:  # a sample drawn at another revision: its own key
                    row["occurrence"] = int(k0.rsplit(":", 1)[1])
                if k0 in again:  # a survivor run again after new tests: keep the first outcome, add the new one
                    first = done[k0]
                    moved = (row["before"], row["after"]) != (first["before"], first["after"])  # the code changed
                    row = dict(first, now="moved" if moved else row["outcome"],
                               now_tests=row.get("killed_by") or row["tests"])
                with lock:
                    rows.append(row)
                    count[0] += 1
                    log(f"[{count[0]}/{len(todo)}] {row.get('now', row['outcome']):11s} {s.module}:{s.line} "
                        f"{row['before']!r} -> {row['after']!r}")
                    if results is not None:
                        save_results(results, meta, rows)
        except BaseException as e:  # noqa: BLE001 - reported by run()
            errors.append(e)
        finally:
            shutil.rmtree(work, ignore_errors=True)

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(max(1, workers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return meta, rows


def summarize(rows: list[dict], key=None) -> dict[str, dict[str, int]]:
    """Counts per group (or per key(module)) and outcome: timeouts count as killed, a survivor a later test kills
    as killed (and in survived_first), equivalent survivors apart (strict ones, and those within a tolerance)."""
    key = key or group_of
    out: dict[str, dict[str, int]] = {}
    for r in rows:
        g = out.setdefault(key(r["module"]), {"mutants": 0, "killed": 0, "survived": 0, "equivalent": 0,
                                                   "tolerance": 0, "incompetent": 0, "survived_first": 0})
        if r["outcome"] == "no-mutation":
            continue
        g["mutants"] += 1
        if r["outcome"] in ("killed", "timeout"):
            g["killed"] += 1
        elif r["outcome"] == "incompetent":
            g["incompetent"] += 1
        elif equivalence(r):
            g["tolerance" if equivalence(r).tolerance else "equivalent"] += 1
            g["survived_first"] += 1
        elif r.get("now") in ("killed", "timeout"):
            g["killed"] += 1
            g["survived_first"] += 1
        else:
            g["survived"] += 1
            g["survived_first"] += 1
    return out


def equivalence(r: dict) -> Equivalent | None:
    """Why a survivor is equivalent (strictly, or within a tolerance), or None if it is not known to be: by its
    module and the mutated line before and after."""
    return EQUIVALENT.get((r["module"], r["before"], r["after"]))


def report(meta: dict, rows: list[dict], notes: dict[str, str] | None = None, preface: str = "") -> str:
    """docs/validation/mutation.md: the command, the sample, counts per group and module, each survivor's status."""
    notes = notes or {}
    ran = [r for r in rows if r["outcome"] != "no-mutation"]
    planned = meta.get("sample") or meta.get("sites_total")
    lines = ["# Mutation testing of the model code", "",
             "Generated by `python scripts/mutation.py` (logic in `specplan/validation/mutation.py`, mutants from the "
             "`cosmic-ray` library's operators). Each mutant changes one token of one module; the module's related "
             "tests (`TESTS` in that file) run with `-x` in a scratch copy of the repository; a mutant is killed when a "
             "test fails or times out. Survivors of the first run are run again (`--recheck`) after tests were added, "
             "and each is named below with the test that now kills it or why it survives.", "",
             f"Sample: seed {meta.get('seed')}, {planned} mutants drawn (in a seeded random order) from "
             f"{meta.get('sites_total')} sites of the groups {', '.join(meta.get('groups', []))}; "
             f"**{len(ran)} run** ({_extent(len(rows), len(rows) - len(ran), planned)}).",
             ""]
    if preface:
        lines += [preface, ""]
    head = ("| {} | mutants | killed | survived the first run | killed by tests added since | equivalent "
            "| equivalent within tolerance | survive now | incompetent | survival rate now |")
    sep = "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    for title, key in (("group", group_of), ("module", lambda m: m)):
        summ = summarize(ran, key)
        lines += [head.format(title), sep]
        tot = dict.fromkeys(("mutants", "killed", "survived", "equivalent", "tolerance", "incompetent",
                             "survived_first"), 0)
        for g, c in sorted(summ.items()):
            for k in tot:
                tot[k] += c[k]
            lines.append(_row(f"`{g}`" if title == "module" else g, c))
        lines += [_row("**all**", tot), ""]
    lines += ["Survival rate now = survive now / (mutants − equivalent − equivalent within tolerance − "
              "incompetent). An equivalent survivor is one no input tells from the code (`EQUIVALENT` in "
              "specplan/validation/mutation.py, keyed by the module and the mutated line before and after, each with "
              "its argument); one equivalent within tolerance differs at some input by at most the tolerance it "
              "names (a float tie, a random stream, a bisection step).", ""]
    surv = [r for r in ran if r["outcome"] == "survived"]
    if surv:
        lines += ["## Survivors of the first run", "", "| module:line | mutation | status |", "|---|---|---|"]
        for r in sorted(surv, key=lambda r: (r["module"], r["line"])):
            eq = equivalence(r)
            key = f"{r['module']}:{r['operator']}:{r['occurrence']}"
            if eq and eq.tolerance:
                status = f"equivalent within tolerance ({eq.tolerance}): {eq.why}"
            elif eq:
                status = f"equivalent: {eq.why}"
            elif r.get("now") in ("killed", "timeout"):
                status = "killed now by " + notes.get(key, r.get("now_tests", "the tests added since"))
            elif r.get("now") == "moved":
                status = ("not rechecked: the module changed since the run, this site is now another token"
                          + (f" ({notes[key]})" if key in notes else ""))
            else:
                status = "survives: " + notes.get(key, "not classified yet (a gap in the tests)")
            lines.append(f"| {r['module']}:{r['line']} | `{_cell(r['before'])}` → `{_cell(r['after'])}` | {status} |")
        lines.append("")
    return "\n".join(lines)


def _extent(recorded: int, gone: int, planned: int | None) -> str:
    """How much of the sample a results file holds, in words."""
    if recorded < (planned or 0):
        return "a prefix of the sample, itself a uniform sample: the run was stopped"
    return "the whole sample" + (f"; {gone} whose mutated line is gone from today's code not counted" if gone else "")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("`", "'")[:140]


def _row(name: str, c: dict) -> str:
    live = c["mutants"] - c["equivalent"] - c["tolerance"] - c["incompetent"]
    rate = f"{100.0 * c['survived'] / live:.0f} %" if live else "–"
    added = c["survived_first"] - c["equivalent"] - c["tolerance"] - c["survived"]
    return (f"| {name} | {c['mutants']} | {c['killed']} | {c['survived_first']} | {added} | {c['equivalent']} "
            f"| {c['tolerance']} | {c['survived']} | {c['incompetent']} | {rate} |")
