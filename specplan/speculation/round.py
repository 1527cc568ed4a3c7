"""The speculative round as serving engines run it: what one round costs beyond its drafter and its verify GEMMs.

A round (docs/speculation_rounds.md, each engine's files and versions) is: the draft's extend pass over the
positions the target just verified (EAGLE / MTP / draft models write their own KV there and take their first
draft token from it), D - 1 further draft steps (tree drafts run `width` candidates per sequence per step and a
top-k over the draft vocabulary), the target's verify over q = 1 + D (or the tree's) tokens per sequence, then
rejection sampling over the B·q target logits, and host work: the engine's per-step scheduler work plus a
fixed part and a part per running sequence for the round's bookkeeping (accepting, appending and streaming AL
tokens, building the next draft inputs). Which of these run inside CUDA graphs depends on the engine:

- vLLM V1 (0.34.0 vllm/config/vllm.py get_draft_decode_cudagraph_request_sizes, vllm/config/compilation.py
  `max_cudagraph_capture_size` 512 tokens off SM100): the target's uniform verify batch is captured up to
  512 // (1 + K) requests (128 at K = 3); beyond, the verify runs in piecewise graphs (eager attention launches).
  Draft decode steps are captured up to max_num_seqs.
- SGLang 0.5.23 (srt/speculative/eagle_worker_v2.py, eagle_draft_cuda_graph_runner.py): verify, draft and draft
  extend each have a graph runner over the decode capture sizes (cuda_graph max_bs 256 on H100 at TP < 4, 512 at
  TP >= 4); spec v2 overlaps the host work of round n + 1 with round n.
- TensorRT-LLM (tensorrt_llm/_torch/speculative/eagle3.py, `eagle3_one_model: True` default): the draft loop runs
  inside the target's forward, so the whole round is one graph up to the CUDA-graph batch (128 by default).

Every function takes arrays that broadcast (batch, verify tokens, draft length) and returns seconds.
"""

from __future__ import annotations

import numpy as np

from specplan.core.records import record
from specplan.core.unique import on_unique
from specplan.costs.gemm import elementwise_cost, gemm_cost
from specplan.model.step import step_time
from specplan.model.parallel import attention_tp, draft_parallelism, instance_call

LOGIT_BYTES = 4  # fp32 logits / probabilities (vLLM and SGLang samplers upcast logits to float32)
# Passes over the B x q x V fp32 tensor by the rejection step: greedy = argmax over the target logits (one read);
# probabilistic = softmax of the target logits (read + write), then the rejection kernel reads target and draft
# probabilities (two reads) (vLLM 0.34.0 vllm/v1/worker/gpu/spec_decode/rejection_sampler.py; SGLang 0.5.23
# srt/speculative/eagle_utils.py tree_speculative_sampling_target_only).
REJECTION_PASSES = {"greedy": 1.0, "probabilistic": 4.0}
# Mechanisms whose draft re-reads the verified positions (its KV for them and its first proposal come from a
# pass at q tokens per sequence): EAGLE-3 and MTP heads (draft extend), draft models (their own verify-length step).
EXTEND_MECHANISMS = ("eagle3", "mtp", "external")


def verify_graph_cap(eng, q) -> np.ndarray:
    """Largest verify batch (requests) replayed in a CUDA graph at q tokens per sequence: verify_graph_max_tokens // q
    when the engine caps graphs in tokens, else graph_max_batch requests; 0 without decode graphs."""
    q = np.asarray(q, dtype=float)
    if not eng.cuda_graphs_decode:
        return np.zeros(q.shape)
    if eng.verify_graph_max_tokens:
        return np.floor(eng.verify_graph_max_tokens / np.maximum(q, 1.0))
    return np.full(q.shape, float(eng.graph_max_batch) if eng.graph_max_batch else np.inf)


def verify_graphed(eng, batch, q) -> np.ndarray:
    """True where a verify (or decode, q = 1) step of `batch` sequences replays a CUDA graph: up to its cap
    (verify_graph_cap) with padding, only at the captured sizes without (EngineProfile.graphed; TensorRT-LLM's
    default enable_padding false captures 1-31, 32, 64, 128 and runs any other batch eagerly)."""
    q = np.asarray(q, dtype=float)
    b = np.asarray(batch, dtype=float)
    cap_dec = float(eng.graph_max_batch) if eng.graph_max_batch else np.inf
    cap = np.where(q > 1, verify_graph_cap(eng, q), cap_dec)
    return eng.graphed(b, 0) & (b <= cap)


def rejection_s(hw, batch, q, vocab, tp=1, sampling="probabilistic", passes=None) -> np.ndarray:
    """GPU seconds of rejection sampling over batch x q fp32 target logits (vocab / tp columns per device)
    beyond the plain sampler's batch x 1 rows: memory-bound passes, REJECTION_PASSES per verified row beyond the
    first, or `passes` = (per verified row, per request net of the plain sampler) where the engine's code counts
    them (EngineProfile.rejection_passes): batch x (q x row + request) full-vocabulary rows."""
    b = np.asarray(batch, dtype=float)
    q = np.asarray(q, dtype=float)
    if passes is None:
        nbytes = b * np.maximum(q - 1.0, 0.0) * float(vocab) * LOGIT_BYTES * REJECTION_PASSES[sampling]
    else:
        row, req = float(passes[0]), float(passes[1])
        nbytes = b * np.maximum(q * row + req, 0.0) * float(vocab) * LOGIT_BYTES
    t = elementwise_cost(hw, np.maximum(nbytes, 1.0)).time_s
    return np.where(q > 1, t, 0.0)


def engine_rejection_passes(eng, sampling):
    """The engine's counted (per verified row, per request) passes for `sampling`, or None (REJECTION_PASSES)."""
    table = getattr(eng, "rejection_passes", None) if eng is not None else None
    pair = table.get(sampling) if table else None
    return None if pair is None else (float(pair[0]), float(pair[1]))


def tree_topk_s(hw, batch, width, steps, draft_vocab) -> np.ndarray:
    """GPU seconds of the tree drafts' top-k: one read of batch x width fp32 draft logits per draft step."""
    nbytes = np.asarray(batch, dtype=float) * np.asarray(width, dtype=float) * float(draft_vocab) * LOGIT_BYTES
    t = elementwise_cost(hw, np.maximum(nbytes, 1.0)).time_s
    return np.where(np.asarray(width) > 1, np.asarray(steps, dtype=float) * t, 0.0)


MASK_BITS_PER_BYTE = 8.0  # the verify's attention reads the tree mask bit-packed (flashinfer segment_packbits)


def tree_mask_bytes(batch, q, context) -> np.ndarray:
    """Bytes of a full tree mask (SGLang TreeMaskMode.FULL_MASK, one bool per pair): each of a sequence's q verified
    tokens against its cached prefix and the q tree tokens, batch x q x (context + q) (srt/speculative/eagle_utils.py
    build_tree_kernel_efficient: torch.full(seq_lens_sum * q + q * q * bs))."""
    q = np.asarray(q, dtype=float)
    return np.asarray(batch, dtype=float) * q * (np.asarray(context, dtype=float) + q)


def mask_read_rows(model, tp) -> float:
    """Attention layers x KV heads per device of `model` at attention TP `tp` (1 latent head for MLA): how many
    times a verify step's attention reads the packed tree mask (once per layer and KV head; GQA rows of one KV head
    share a tile)."""
    from specplan.profiles.model import ATTENTION_MIXERS

    rows = 0.0
    for g in model.groups():
        if g.mixer in ATTENTION_MIXERS:
            rows += g.count * (1 if model.mla is not None else model.heads_per_device(tp, model.kv_heads_of(g))[1])
    return rows


def tree_mask_s(model, hw, tp, batch, q, context) -> np.ndarray:
    """GPU seconds of a full tree mask per round: building it (one write), packing it to bits (one read, an eighth
    written) and every attention layer reading the packed bits per KV head (mask_read_rows)."""
    mb = tree_mask_bytes(batch, q, context)
    build = elementwise_cost(hw, np.maximum(mb * (2.0 + 1.0 / MASK_BITS_PER_BYTE), 1.0)).time_s
    eff = hw.kernel_eff("default").mem_bw_fraction
    read = mb / MASK_BITS_PER_BYTE * mask_read_rows(model, attention_tp(tp)) / (hw.mem_bandwidth_bytes_s * eff)
    return build + read


def prefix_reread_s(draft, hw, tp, batch, width, context, prec) -> np.ndarray:
    """GPU seconds one tree draft step spends re-reading the cached prefix for its other width - 1 candidates, where
    the engine's draft attention runs one decode row per candidate (each row's kv_indices hold the whole prefix:
    SGLang spec_utils.py generate_draft_decode_kv_indices, seq_lens_sum x topk): (width - 1) x batch x the draft's
    KV bytes per sequence at `context`, memory-bound."""
    from specplan.model.memory import kv_bytes_per_seq

    t_d, _, bb = instance_call(draft_parallelism(draft, tp), batch)
    per_seq = kv_bytes_per_seq(draft, t_d, prec.kv, context)
    nbytes = np.maximum(np.asarray(width, dtype=float) - 1.0, 0.0) * np.asarray(bb, dtype=float) * per_seq
    return nbytes / (hw.mem_bandwidth_bytes_s * hw.kernel_eff("default").mem_bw_fraction)


def draft_vocab(draft) -> int:
    """Columns of the draft's logits: an EAGLE-3 head's reduced draft_vocab_size, else its vocabulary."""
    return int(draft.draft_vocab_size or draft.vocab_size)


def fc_s(draft, hw, rows, prec) -> np.ndarray:
    """GPU seconds of an EAGLE-3 head's 3h -> h fusion over `rows` positions (0 for other drafts)."""
    if draft.kind != "eagle3_head":
        return np.zeros(np.shape(rows))
    h = draft.hidden_size
    return gemm_cost(hw, np.maximum(np.asarray(rows, dtype=float), 1.0), h, 3 * h, prec.w("fc"), prec.compute).time_s


def draft_pass_extra_s(draft, hw, tp, batch, tokens, context, prec, extend=True) -> np.ndarray:
    """GPU seconds a draft pass at `tokens` tokens per sequence costs beyond one at 1 token (the drafter prices
    q_len 1 steps). `extend`: the draft extend over the verified positions, whose logits are taken at each
    request's last accepted position only (vLLM 0.34.0 target_dependent_ar/speculator.py `_prefill`:
    last_hidden_states[last_token_indices]; SGLang and TensorRT-LLM likewise) and whose EAGLE-3 fusion the
    drafter prices already (drafters.draft_eagle3: fc over B x (1 + D) once); else a tree step's `tokens`
    candidates per request, each with its logits."""
    tp_d = draft_parallelism(draft, tp)  # an int as before; under a Layout the target's TP / DP (/ EP), per DP rank

    def extra(b, t, c):
        t_d, lay, bb = instance_call(tp_d, b)
        rows = bb if extend else None
        wide = step_time(draft, hw, t_d, bb, np.maximum(t, 1.0), c, precision=prec, logits_rows=rows, **lay).total_s
        one = step_time(draft, hw, t_d, bb, 1, c, precision=prec, logits_rows=rows, **lay).total_s
        fc = fc_s(draft, hw, bb * np.maximum(t, 1.0), prec) - fc_s(draft, hw, bb, prec)
        return np.where(t > 1, np.maximum(wide - one - fc, 0.0), 0.0)

    return on_unique(extra, batch, tokens, context)


def zero_draft_extend_s(draft, hw, tp, batch, context, prec) -> np.ndarray:
    """GPU seconds of the draft extend a speculative deployment runs at D = 0 (one verified position per
    request, no draft logits: vLLM 0.34.0 `_prefill(skip_sample=num_speculative_tokens == 0)`; SGLang 0.5.23
    eagle_worker_v2.py 'Drafting disabled (high batch size). _draft_extend below still runs')."""
    tp_d = draft_parallelism(draft, tp)

    def one(b, c):
        t_d, lay, bb = instance_call(tp_d, b)
        return step_time(draft, hw, t_d, bb, 1, c, precision=prec, logits_rows=0, **lay).total_s

    return on_unique(one, batch, context)


def tree_width(eng, draft_len, q) -> np.ndarray:
    """Candidates per request in each draft step of a tree (verified tokens q > 1 + D): the engine's topk where it
    sets one (SGLang runs topk tokens per request per draft step, spec_utils.py select_top_k_tokens), else the
    tree's nodes spread over its depth, ceil((q - 1) / D); 1 for a chain."""
    d = np.asarray(draft_len, dtype=float)
    q = np.asarray(q, dtype=float)
    spread = np.ceil((q - 1.0) / np.maximum(d, 1.0))
    k = getattr(eng, "spec_topk", None) if eng is not None else None
    return np.where(q > 1 + d, float(k) if k else spread, 1.0)


@record
class RoundShape:
    """One speculative round's grid (numbers or broadcast arrays): sequences, draft length D, verified tokens per
    sequence (1 + D for a chain, more for a tree), cached context tokens."""

    batch: object
    draft_len: object
    verify_tokens: object
    context: object


def round_gpu_extra_s(model, hw, tp, shape: RoundShape, mechanism, draft=None, sampling=None, eng=None) -> np.ndarray:
    """GPU seconds of one speculative round beyond drafter + verify: draft extend (EAGLE / MTP / draft model),
    tree draft width and top-k, rejection sampling (`sampling`, default the engine's verification, else
    probabilistic; at the engine's counted passes where it has them, rejection_passes). `draft` = (draft
    ModelProfile, Precision) or None. At D = 0 an engine that keeps its draft warm (zero_draft_extend) still runs
    the draft's one-position extend."""
    d = np.asarray(shape.draft_len, dtype=float)
    q = np.asarray(shape.verify_tokens, dtype=float)
    b = np.asarray(shape.batch, dtype=float)
    context = shape.context
    spec = d > 0
    if sampling is None:
        sampling = "greedy" if getattr(eng, "verification", "probabilistic") == "exact" else "probabilistic"
    t = rejection_s(hw, b, q, model.vocab_size, attention_tp(tp), sampling,  # per DP rank under a Layout
                    engine_rejection_passes(eng, sampling))
    zero = np.zeros(np.broadcast(b, d, q).shape)
    if eng is not None and eng.tree_mask_full:
        t = t + np.where(q > 1 + d, tree_mask_s(model, hw, tp, b, q, context), 0.0)
    if draft is not None and mechanism in EXTEND_MECHANISMS:
        dm, dprec = draft
        t = t + draft_pass_extra_s(dm, hw, tp, b, q, context, dprec)
        tree = q > 1 + d
        width = tree_width(eng, d, q)
        steps = np.maximum(d - 1.0, 0.0)
        t = t + np.where(tree, steps * draft_pass_extra_s(dm, hw, tp, b, width, context, dprec, extend=False), 0.0)
        t = t + np.where(tree, tree_topk_s(hw, b, width, d, draft_vocab(dm)), 0.0)
        if eng is not None and eng.tree_draft_prefix_per_candidate:
            t = t + np.where(tree, steps * prefix_reread_s(dm, hw, tp, b, width, context, dprec), 0.0)
        if eng is not None and eng.zero_draft_extend:
            zero = zero + zero_draft_extend_s(dm, hw, tp, b, context, dprec)
    return np.where(spec, t, zero)


def round_host_s(eng, batch, draft_len) -> np.ndarray:
    """Host seconds of one speculative round beyond a decode step's: the round's own launches outside its graphs
    (spec_round_host_s, counted in the engine's code) plus spec_host_per_seq_s per running sequence (the older
    fitted fixed part, spec_iteration_overhead_s, is in the iteration already); 0 at D = 0."""
    b = np.asarray(batch, dtype=float)
    return np.where(np.asarray(draft_len) > 0, eng.spec_round_host_s + b * eng.spec_host_per_seq_s, 0.0)


def round_s(eng, gpu_s, batch, draft_len, q, target_kernels, draft_kernels, eager=False,
            prompt_tokens=0.0) -> np.ndarray:
    """Seconds of one engine round (or decode step at D = 0) from its GPU seconds: target kernels launched at the
    verify's graph state, draft kernels at the draft's (captured like the decode step up to graph_max_batch
    unless draft_graph_max_batch says otherwise), and the round's host work, overlapped with the GPU when the
    engine overlaps speculative rounds (`spec_overlap`), else added, plus the engine's step_gap_s
    (EngineProfile.combine_s). `eager`: a step run without graphs (one carrying a prefill chunk of `prompt_tokens`
    tokens, each adding the engine's prefill_tokens_s of host work).
    At D = 0 this is EngineProfile.step_s of a decode step."""
    b = np.asarray(batch, dtype=float)
    d = np.asarray(draft_len, dtype=float)
    spec = d > 0
    g_t = verify_graphed(eng, b, q)
    g_d = eng.graphed(b, eng.draft_graph_max_batch or eng.graph_max_batch)
    if eager:
        g_t, g_d = g_t & False, g_d & False
    # eager_step_s is the per-step work of a step carrying a prompt chunk (fitted on TensorRT-LLM's context
    # steps): a decode or verify step above the captured sizes pays its kernels' eager launches only
    launches = (np.asarray(target_kernels, dtype=float) * eng.launch_s(g_t)
                + np.asarray(draft_kernels, dtype=float) * eng.launch_s(g_d))
    if eager:
        launches = launches + eng.eager_step_s
    # the array work below is skipped where it adds a scalar zero (the same numbers: a round is called thousands
    # of times per search on grids of thousands of points)
    host = eng.host_s(b, prompt_tokens)
    if not (_zero(eng.spec_round_host_s) and _zero(eng.spec_host_per_seq_s)):
        host = host + round_host_s(eng, b, d)
    if bool(eng.spec_overlap) == bool(eng.overlap_scheduler):
        return _combine_one(eng, gpu_s, host, launches, bool(eng.spec_overlap), spec.shape)
    overlap = np.where(spec, bool(eng.spec_overlap), bool(eng.overlap_scheduler))
    return eng.combine_s(gpu_s, host, launches, overlap)


def _zero(v) -> bool:
    """True for a scalar zero (a profile number or an option); an array is never taken as zero here."""
    return isinstance(v, (int, float)) and v == 0


def _combine_one(eng, gpu_s, host, launches, overlap: bool, spec_shape: tuple) -> np.ndarray:
    """EngineProfile.combine_s where every point overlaps alike: the one branch np.where would pick, broadcast to
    the shape the draft lengths give (as np.where(spec, overlap, overlap) would)."""
    if overlap:
        step = np.maximum(gpu_s, host + launches)
    else:
        step = host + np.maximum(gpu_s, launches)
    if np.broadcast_shapes(np.shape(step), spec_shape) != np.shape(step):
        step = step + np.zeros(spec_shape)
    return step if _zero(eng.step_gap_s) else step + eng.step_gap_s


def round_draft_model(model, mechanism, draft_model=None):
    """The model whose extend pass a round runs (EAGLE-3 head, MTP module, draft model), or None."""
    from specplan.profiles.registry import load_model
    from specplan.speculation.drafters import eagle3_head, mtp_module

    if mechanism == "external" and draft_model is not None:
        return load_model(draft_model)
    if mechanism == "eagle3":
        return eagle3_head(model, None if draft_model is None else load_model(draft_model))
    if mechanism == "mtp":
        return mtp_module(model)
    return None


def spec_cap_note(eng, batch=None, launched=False) -> list[str]:
    """One line when the engine runs fewer requests at once when speculating (spec_max_num_seqs) than without
    (else []): the serving path prices that cap; recommend (`launched`) prices the launch its files write, which
    lifts it; the step path (`batch` given: the largest speculative batch it ranked) prices its batch as given, so
    the line comes only when that batch exceeds the cap."""
    cap = eng.spec_max_num_seqs
    if cap is None or cap >= eng.max_num_seqs or (batch is not None and batch <= cap):
        return []
    if launched:
        return [f"engine {eng.id}: speculative rows are priced as specplan's launch files start it, with "
                f"--max-running-requests at the answer's concurrency; a launch without it runs at most {cap} "
                f"requests at once when speculating (spec_max_num_seqs; predict prices that default)"]
    head = (f"engine {eng.id}: at most {cap} requests run at once when speculating unless the launch sets its own cap "
            f"(spec_max_num_seqs; SGLang: --max-running-requests, which specplan's launch files set to the answer's "
            f"batch)")
    if batch is not None:
        return [f"{head}: the step path prices batch {batch:g} as given, which needs that flag"]
    return [f"{head}: speculative rows are priced with it, the baseline with max_num_seqs {eng.max_num_seqs}; an "
            f"engine YAML with a larger spec_max_num_seqs prices a launch that raises it"]


def moe_verify_note() -> list[str]:
    """One line for a speculative MoE target: how a verify's expert reads are priced, and that the speedup's trend
    with load is where the published MoE sweeps and the model part most (docs/validation/speculation_load.md)."""
    from specplan.costs import moe

    how = ("as if its tokens chose experts independently" if moe.VERIFY_EXPERT_REUSE == 0.0 else
           f"with a sequence's verify tokens reusing experts at {moe.VERIFY_EXPERT_REUSE:g}")
    return [f"MoE target: a verify step's expert reads are priced {how} (costs/moe.py): at small batch a verify "
            f"reads up to 1 + D times a decode step's experts, a cost that fades once a step touches every expert; how "
            f"the speedup changes with load is the least validated part of an MoE answer (the model misses the trend "
            f"of most published MoE sweeps: docs/validation/speculation_load.md)"]


def unfitted_note(eng) -> list[str]:
    """One line when the engine's host numbers (per step, per sequence, the speculative round's per sequence) hold
    values that nothing fitted out of sample (else [])."""
    if eng.id == "ideal":
        return []
    host = [k for k in ("host_step_s", "host_per_seq_s") if not eng.sources.get(k)]
    src = eng.sources.get("spec_host_per_seq_s", "")
    if not src:
        items = [f"{k} = {getattr(eng, k) * 1e6:g} us" for k in host]
        items.append(f"the speculative round's spec_host_per_seq_s = {eng.spec_host_per_seq_s * 1e6:g} us")
        return [f"engine {eng.id}: host time not fitted out of sample ({', '.join(items)}): times under load may "
                f"be low and speculative speedups high (docs/validation/speculation_load.md)"]
    if "in-sample" in src:
        return [f"engine {eng.id}: spec_host_per_seq_s = {eng.spec_host_per_seq_s * 1e6:.0f} us is fitted in-sample "
                f"on one published setup, not validated out of sample (docs/validation/speculation_load.md)"]
    if host:
        return [f"engine {eng.id}: host time not fitted ({', '.join(host)}): times under load may be low"]
    return []
