"""Engine launch commands from a recommend answer: vLLM, SGLang, TensorRT-LLM, and Dynamo for disaggregated answers.

Input is a plain dict (the `recommend --json` answer, or its `best` row plus model / hardware / layout / kv dtype),
normalised once by `plan_from_answer`; each `build_*` returns a `Launch` (argv, config files, notes) and `render`
prints it. Every flag and config key comes from the lists extracted from the engines' own code (flags/*.json);
`check_launch` verifies a launch against them. A mechanism an engine lacks raises one SpecplanError line.
"""

from __future__ import annotations

import json
import math
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import yaml

from specplan.core.errors import SpecplanError

FLAGS_DIR = Path(__file__).with_name("flags")
ENGINES = ("vllm", "sglang", "trtllm", "dynamo")
DEFAULT_TOKEN_BUDGET = 8192  # vLLM's and TensorRT-LLM's default per-step token budget (max_num_batched_tokens)

# specplan mechanism -> each engine's name for it (None: the engine has no such method in the extracted version).
METHODS = {
    "vllm": {"eagle3": "eagle3", "mtp": "mtp", "external": "draft_model", "ngram": "ngram", "dflash": "dflash",
             "dspark": "dspark", "medusa": None, "self": None},
    "sglang": {"eagle3": "EAGLE3", "mtp": "NEXTN", "external": "STANDALONE", "ngram": "NGRAM", "dflash": "DFLASH",
               "dspark": "DSPARK", "medusa": None, "self": None},
    "trtllm": {"eagle3": "Eagle3", "mtp": "MTP", "external": "Draft_Target", "ngram": "NGram", "dflash": "DFlash",
               "dspark": "DSpark", "medusa": None, "self": None},
}
NEEDS_DRAFT = {"eagle3", "external", "dflash"}
KV_DTYPES = {  # specplan KV dtype -> engine value (None: the checkpoint's own = "auto")
    "vllm": {None: "auto", "bf16": "bfloat16", "fp16": "float16", "fp8": "fp8", "fp4": "nvfp4", "nvfp4": "nvfp4"},
    "sglang": {None: "auto", "bf16": "bfloat16", "fp16": "auto", "fp8": "fp8_e4m3", "fp4": "nvfp4", "nvfp4": "nvfp4"},
    "trtllm": {None: "auto", "bf16": "bfloat16", "fp16": "float16", "fp8": "fp8", "fp4": "nvfp4", "nvfp4": "nvfp4"},
}


@lru_cache(maxsize=None)
def flag_list(engine: str) -> dict:
    """The committed flag / key list of one engine (flags/<engine>.json)."""
    return json.loads((FLAGS_DIR / f"{engine}.json").read_text())


@dataclass
class Launch:
    """What runs one answer on one engine: a command line, config files to write beside it, and notes."""

    engine: str
    version: str
    argv: list[str]
    files: dict[str, dict] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


LOADS = ("concurrency", "decode_batch")  # answer fields that are loads (a Little's-law mean may be fractional)


def _int(answer: dict, key: str, default: int) -> int:
    """A whole-number answer field (D, TP, batch, replicas ...): a fraction is refused, not rounded (2.5 is no
    draft length); a load (LOADS) is rounded up to the requests it must admit."""
    v = answer.get(key, default)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v or v < 0 or v == float("inf"):
        raise SpecplanError(f"launch: answer field '{key}' must be a non-negative number, got {v!r}")
    if key not in LOADS and v != int(v):
        raise SpecplanError(f"launch: answer field '{key}' must be a whole number, got {v!r}")
    return int(math.ceil(v))


def _pools(p) -> dict | None:
    """{'prefill': {...}, 'decode': {...}} from '2P1D' or a dict; None for aggregated."""
    if p is None:
        return None
    if isinstance(p, str):
        s = p.strip().upper()
        if "P" not in s or not s.endswith("D"):
            raise SpecplanError(f"launch: answer field 'pools' must look like 2P1D, got {p!r}")
        x, y = s[:-1].split("P")
        if not (x.isdigit() and y.isdigit()) or int(x) < 1 or int(y) < 1:
            raise SpecplanError(f"launch: answer field 'pools' must look like 2P1D, got {p!r}")
        return {"prefill": {"replicas": int(x)}, "decode": {"replicas": int(y)}}
    if isinstance(p, dict) and {"prefill", "decode"} <= set(p):
        for k in ("prefill", "decode"):
            r = p[k].get("replicas", 1) if isinstance(p[k], dict) else None
            if isinstance(r, bool) or not isinstance(r, int) or r < 1:
                raise SpecplanError(f"launch: answer field 'pools.{k}' must hold replicas >= 1 (a whole number), "
                                    f"got {p[k]!r}")
        return {k: dict(p[k]) for k in ("prefill", "decode")}
    raise SpecplanError(f"launch: answer field 'pools' must be 'xPyD' or {{prefill: ..., decode: ...}}, got {p!r}")


def plan_from_answer(answer: dict, **given) -> dict:
    """One flat plan from a recommend answer (the whole `--json` output or its best row) plus `given` defaults.

    Keys: model, hf_repo, mechanism, draft_len, draft_repo, tree_topk, tree_tokens, max_batch, token_budget,
    kv_dtype, dtype, checkpoint_dtype, tp, dp, ep, pp, mode, pools, units (disaggregated units side by side),
    d_schedule [(batch_lo, batch_hi, D)], isl, osl."""
    from specplan.profiles.registry import load_model, model_ids

    if not isinstance(answer, dict):
        raise SpecplanError("launch: the answer must be a JSON object (recommend --json output)")
    _check_dtypes(given, {"dtype": "--dtype", "kv_dtype": "--kv-dtype"})  # the flags, whatever the answer says
    if isinstance(answer.get("counts"), list) and "answer" in answer:  # recommend --target-tps (GPUs for a load)
        answer = _capacity_answer(answer)
    best = answer.get("best", answer) if isinstance(answer.get("best", answer), Mapping) else None  # a record too
    if best is None:
        raise SpecplanError("launch: the answer has no best configuration (recommend found none that fits)")
    if isinstance(best.get("best"), dict):  # recommend --gpus: the best layout, its serving point under "best"
        best = {**{k: v for k, v in best.items() if k != "best"}, **best["best"]}
    src = {**{k: v for k, v in answer.items() if k not in ("best", "ranked", "grid", "runners_up", "per_mechanism")},
           **best}
    for k, v in given.items():
        if v is not None and src.get(k) is None:
            src[k] = v
    model_id = src.get("model")
    if not isinstance(model_id, str) or not model_id:
        raise SpecplanError("launch: answer field 'model' is missing")
    prof = load_model(model_id) if model_id in model_ids() else None
    lay = _layout_fields(src.get("decode_layout") or src.get("layout"))
    mech = src.get("mechanism") or "none"
    d = _int(src, "draft_len", 0)
    if mech == "none":
        d = 0
    if mech != "none" and d < 1:
        raise SpecplanError(f"launch: mechanism {mech} needs draft_len >= 1, got {d}")
    pools = _pools(src.get("pools"))
    if pools is not None:  # pools of their own layouts (recommend --gpus for an MoE model, --prefill-layout)
        for role in ("prefill", "decode"):
            pools[role].update({k: v for k, v in _layout_fields(src.get(f"{role}_layout")).items()
                                if k not in pools[role]})
    batch = _int(src, "batch", 0)
    if not batch and src.get("concurrency") is not None:  # closed loop: every request may run (split over the
        y = pools["decode"].get("replicas", 1) if pools else 1  # decode replicas of a disaggregated answer)
        batch = math.ceil(_int(src, "concurrency", 1) / y)
    batch = batch or _int(src, "decode_batch", 0) or 256
    draft_repo = _draft_repo(src.get("draft_repo") or src.get("draft_model"))
    if draft_repo is None and mech == "eagle3" and prof is not None and f"eagle3-{prof.id}" in model_ids():
        draft_repo = load_model(f"eagle3-{prof.id}").hf_repo
    sched = src.get("d_schedule") or src.get("draft_len_schedule") or _schedule_by_load(src, mech)
    plan = {
        "model": model_id,
        "hf_repo": src.get("hf_repo") or (prof.hf_repo if prof is not None and prof.hf_repo else model_id),
        "mechanism": mech, "draft_len": d, "draft_repo": draft_repo,
        "tree_topk": _int(src, "tree_topk", 1), "tree_tokens": _int(src, "tree_tokens", d + 1 if d else 0),
        "max_batch": batch,
        "token_budget": _int(src, "token_budget", max(DEFAULT_TOKEN_BUDGET, batch * (1 + d))),
        "kv_dtype": src.get("kv_dtype"), "dtype": src.get("dtype"),
        "checkpoint_dtype": src.get("checkpoint_dtype") or (prof.weight_dtype if prof is not None else None),
        "tp": _int(lay, "tp", _int(src, "tp", 1)), "dp": _int(lay, "dp", _int(src, "dp", 1)),
        "ep": _int(lay, "ep", _int(src, "ep", 1)), "pp": _int(lay, "pp", _int(src, "pp", 1)),
        "mode": src.get("mode") or "agg", "pools": pools, "engine": src.get("engine"),
        "replicas": _int(src, "replicas", 1) if pools is None else 1,
        "units": _int(src, "replicas", 1) if pools is not None else 1,  # recommend --gpus: xPyD units side by side
        "d_schedule": _schedule(sched) if sched else None,
        "hardware": src.get("hardware"), "isl": src.get("isl"), "osl": src.get("osl"),
    }
    if plan["mode"] == "disagg" and plan["pools"] is None:
        plan["pools"] = {"prefill": {"replicas": 1}, "decode": {"replicas": 1}}
    _check_plan(plan, prof)
    return plan


def _layout_fields(lay) -> dict:
    """{tp, dp, ep, pp} of an answer's layout: a dict as given, a spelling in the --layouts grammar ('dp8ep8'),
    else {} (a display string such as '4 x TP 8': the answer's tp field holds it)."""
    if isinstance(lay, Mapping):  # a dict or a record (planning/answer_parts.LayoutNumbers)
        return lay
    if isinstance(lay, str):
        from specplan.model.parallel import parse_layout

        try:
            x = parse_layout(lay)
        except SpecplanError:
            return {}
        return {"tp": x.tp, "dp": x.dp, "ep": x.ep, "pp": x.pp}
    return {}


def _draft_repo(ref) -> str | None:
    """The Hugging Face repo a launch names for a draft: a built-in id's or a profile YAML's `hf_repo`, else the
    reference itself (an org/name kept from --draft-model)."""
    from specplan.profiles.registry import load_model, model_ids

    if not isinstance(ref, str) or not ref:
        return None
    if ref in model_ids() or (ref.endswith((".yaml", ".yml")) and Path(ref).is_file()):
        return load_model(ref).hf_repo or ref
    return ref


def _schedule_by_load(src: dict, mechanism: str):
    """recommend's D by load (`d_by_load`, the best D per concurrency band in vLLM's [[lo, hi, D]] form) when it
    schedules the answer's own mechanism; None otherwise."""
    s = src.get("d_by_load")
    if isinstance(s, dict) and s.get("mechanism", mechanism) == mechanism and isinstance(s.get("vllm"), list):
        return s["vllm"]
    return None


def answer_identity(model, draft=None) -> dict:
    """What a saved answer needs to launch without the profiles it was priced with: the model's Hugging Face repo
    and checkpoint dtype, and the draft's repo (or profile) — `recommend --json` carries them."""
    out = {"hf_repo": model.hf_repo or None, "checkpoint_dtype": model.weight_dtype}
    if draft is not None and (draft.hf_repo or draft.profile):
        out["draft_model"] = draft.hf_repo or draft.profile
    return {k: v for k, v in out.items() if v is not None}


def check_emittable(engine: str, model, mechanisms, draft=None) -> None:
    """Refuse, before any search, a launch that could not be built: a mechanism the engine lacks, or a draft
    mechanism with no draft known for the model (no --draft-model and no built-in head)."""
    from specplan.profiles.registry import model_ids

    eng = "sglang" if engine == "dynamo" else engine
    if eng not in METHODS:
        return
    for mech in mechanisms or []:
        if mech == "none":
            continue
        _method(eng, {"mechanism": mech, "model": model.id, "draft_repo": "-"})
        has_head = mech == "eagle3" and f"eagle3-{model.id}" in model_ids()
        if mech in NEEDS_DRAFT and not has_head and (draft is None or not (draft.hf_repo or draft.profile)):
            raise SpecplanError(f"launch: mechanism '{mech}' needs a draft model for {model.id} and none is known: "
                                f"give --draft-model ORG/NAME (its Hugging Face repo) or leave '{mech}' out "
                                f"(refused before the search)")


def _check_dtypes(values: dict, names: dict) -> None:
    """Refuse an unknown weight or KV dtype in one line naming where it came from (`names`: key -> what to call it)."""
    from specplan.core.dtypes import canonical_dtype

    for key, name in names.items():
        v = values.get(key)
        if v is not None and not (key == "kv_dtype" and str(v).lower() == "auto"):
            canonical_dtype(v, name)


def _check_plan(plan: dict, prof) -> None:
    """Refuse answer numbers no engine can launch, in one line naming the answer field: an unknown dtype, D above
    DRAFT_LEN_LIMIT, a batch above MAX_BATCH, a TP that does not split the model's query heads."""
    from specplan.core.limits import DRAFT_LEN_LIMIT, MAX_BATCH, MAX_TP

    _check_dtypes(plan, {k: f"launch: answer field '{k}'" for k in ("dtype", "kv_dtype")})
    for key, hi in (("draft_len", DRAFT_LEN_LIMIT), ("max_batch", MAX_BATCH), ("tp", MAX_TP)):
        if plan[key] > hi:
            raise SpecplanError(f"launch: answer field '{key}' must be <= {hi:,}, got {plan[key]:,}")
    if plan["tp"] < 1:
        raise SpecplanError(f"launch: answer field 'tp' must be >= 1, got {plan['tp']}")
    if prof is not None and prof.num_q_heads % plan["tp"]:
        raise SpecplanError(f"launch: answer field 'tp' ({plan['tp']}) does not split the {prof.num_q_heads} query "
                            f"heads of {prof.id}")


def _capacity_answer(a: dict) -> dict:
    """A `recommend --target-tps --json` answer as the serving answer plan_from_answer reads: its `answer` picks the
    aggregated replicas (TP, replicas, concurrency per replica) or the disaggregated pools (prefill groups of the
    node's TP, decode instances of the best layout, batch per instance)."""
    from specplan.model.parallel import parse_layout

    pick = a.get("answer")
    if not isinstance(pick, dict) or pick.get("mode") not in ("agg", "disagg"):
        raise SpecplanError("launch: the answer has no configuration that meets the targets (answer is null)")
    top = {k: a.get(k) for k in ("model", "hardware", "engine", "isl", "osl", "kv_dtype", "dtype", "hf_repo",
                                 "checkpoint_dtype", "draft_model", "draft_repo")}
    if pick["mode"] == "agg":
        g = a.get("aggregated")
        if not isinstance(g, dict):
            raise SpecplanError("launch: answer field 'aggregated' is missing")
        return {**top, "best": {"mode": "agg", "tp": g.get("tp"), "replicas": g.get("replicas"),
                                "mechanism": g.get("mechanism"), "draft_len": g.get("draft_len"),
                                "concurrency": g.get("concurrency_per_replica"), "pools": None}}
    b = a.get("best")
    if not isinstance(b, dict) or not isinstance(b.get("layout"), str):
        raise SpecplanError("launch: answer field 'best' (the disaggregated pools) is missing")
    try:
        lay = parse_layout(b["layout"])
    except (SpecplanError, ValueError):
        raise SpecplanError(f"launch: answer field 'best.layout' is not a layout, got {b['layout']!r}") from None
    node = _int(a, "node_gpus", 8) or 8
    return {**top, "best": {"mode": "disagg", "mechanism": b.get("mechanism"), "draft_len": b.get("draft_len"),
                            "batch": b.get("batch"), "layout": {"tp": lay.tp, "dp": lay.dp, "ep": lay.ep, "pp": lay.pp},
                            "pools": {"prefill": {"replicas": _int(b, "prefill_gpus", 0) // node, "tp": node},
                                      "decode": {"replicas": _int(b, "instances", 1)}}}}


def _schedule(s) -> list[tuple[int, int, int]]:
    """[(batch_lo, batch_hi, D)] from [[lo, hi, D], ...] or {batch_hi: D} (TRT-LLM's form)."""
    out = []
    bad = SpecplanError(f"launch: answer field 'd_schedule' must be [[batch_lo, batch_hi, D], ...] of whole numbers, "
                        f"got {s!r}")
    if isinstance(s, dict):
        lo = 1
        try:
            pairs = sorted((_whole(float(k), bad), _whole(v, bad)) for k, v in s.items())
        except (TypeError, ValueError):
            raise bad from None
        for hi, dd in pairs:
            out.append((lo, hi, dd))
            lo = hi + 1
    elif isinstance(s, list) and all(isinstance(r, (list, tuple)) and len(r) == 3 for r in s):
        out = [tuple(_whole(x, bad) for x in r) for r in s]
    else:
        raise bad
    return out


def _whole(v, err: SpecplanError) -> int:
    """v as an int when it is a finite whole number >= 0 (2.0 is 2; 2.5, a string or a bool are `err`)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not (0 <= v < float("inf")) or v != int(v):
        raise err
    return int(v)


def _method(engine: str, plan: dict) -> str | None:
    """The engine's name for the plan's mechanism, or a one-line error naming what the engine lacks."""
    mech = plan["mechanism"]
    if mech == "none":
        return None
    m = METHODS[engine].get(mech, None)
    if m is None:
        v = flag_list(engine)["version"]
        raise SpecplanError(f"launch: {engine} ({v}) has no speculative method for mechanism '{mech}'; "
                            f"it supports {', '.join(k for k, x in METHODS[engine].items() if x)}")
    if mech in NEEDS_DRAFT and not plan["draft_repo"]:
        raise SpecplanError(f"launch: mechanism '{mech}' needs a draft model (answer field 'draft_model' or "
                            f"--draft-model); none is known for {plan['model']}")
    return m


def per_dp_rank(plan: dict) -> int:
    """The answer's running-request cap per data-parallel rank (vLLM's max_num_seqs and TensorRT-LLM's
    max_batch_size apply per rank; SGLang's max_running_requests is the instance's)."""
    return max(1, math.ceil(plan["max_batch"] / plan["dp"]))


def _quant_note(plan: dict, engine: str) -> tuple[str | None, str | None]:
    """(online quantization value, note) when the answer's weight dtype differs from the checkpoint's."""
    want, have = plan["dtype"], plan["checkpoint_dtype"]
    if not want or want == have or want in ("bf16", "fp16") and have in ("bf16", "fp16"):
        return None, None
    if want == "fp8" and engine in ("vllm", "sglang"):
        return "fp8", f"weights quantized to FP8 at load (--quantization fp8); checkpoint is {have}"
    return None, (f"the answer assumes {want} weights but the checkpoint is {have}: point the command at a {want} "
                  f"checkpoint (this engine does not quantize at load)")


def build_vllm(plan: dict, worker: bool = False) -> Launch:
    """`vllm serve MODEL ...` for the plan (worker=True: the engine flags only, for a Dynamo worker)."""
    fl = flag_list("vllm")
    argv = [] if worker else ["vllm", "serve", plan["hf_repo"]]
    notes = []
    argv += ["--tensor-parallel-size", str(plan["tp"])]
    if plan["pp"] > 1:
        argv += ["--pipeline-parallel-size", str(plan["pp"])]
    if plan["dp"] > 1:
        argv += ["--data-parallel-size", str(plan["dp"])]
    if plan["ep"] > 1:
        argv += ["--enable-expert-parallel"]
        if plan["ep"] != plan["tp"] * plan["dp"]:
            notes.append(f"vLLM's expert parallelism spans TP x DP = {plan['tp'] * plan['dp']} GPUs, not the "
                         f"answer's EP {plan['ep']}")
    argv += ["--max-num-seqs", str(per_dp_rank(plan)), "--max-num-batched-tokens", str(plan["token_budget"]),
             "--kv-cache-dtype", KV_DTYPES["vllm"].get(plan["kv_dtype"], "auto")]
    if plan["dp"] > 1:  # vllm 0.34.0 config/scheduler.py: "max_num_seqs, which applies per data-parallel rank"
        notes.append(f"--max-num-seqs is per data-parallel rank: the answer's {plan['max_batch']} requests over "
                     f"{plan['dp']} ranks")
    q, note = _quant_note(plan, "vllm")
    if q:
        argv += ["--quantization", q]
    if note:
        notes.append(note)
    method = _method("vllm", plan)
    if method:
        sc = {"method": method, "num_speculative_tokens": plan["draft_len"]}
        if plan["draft_repo"] and plan["mechanism"] in NEEDS_DRAFT:
            sc["model"] = plan["draft_repo"]
        if plan["d_schedule"] and plan["dp"] > 1:  # vllm 0.34.0 config/vllm.py drops the schedule with DP > 1
            notes.append(f"vLLM ignores num_speculative_tokens_per_batch_size with --data-parallel-size > 1: the "
                         f"answer's D = {plan['draft_len']} is emitted for every batch")
        elif plan["d_schedule"]:
            sc["num_speculative_tokens_per_batch_size"] = [list(r) for r in plan["d_schedule"]]
            sc["num_speculative_tokens"] = max(r[2] for r in plan["d_schedule"])
        argv += ["--speculative-config", json.dumps(sc, separators=(",", ":"))]
        if plan["tree_topk"] > 1:
            notes.append("vLLM drafts a chain: the answer's tree (top-k > 1) is emitted as a chain of the same depth")
    return Launch("vllm", fl["version"], argv, notes=notes)


def build_sglang(plan: dict, worker: bool = False) -> Launch:
    """`python -m sglang.launch_server --model-path MODEL ...` for the plan."""
    fl = flag_list("sglang")
    argv = ([] if worker else ["python", "-m", "sglang.launch_server"]) + ["--model-path", plan["hf_repo"]]
    notes = []
    gpus = plan["tp"] * plan["dp"]
    argv += ["--tp-size", str(gpus)]
    if plan["pp"] > 1:
        argv += ["--pp-size", str(plan["pp"])]
    if plan["dp"] > 1:
        argv += ["--attn-dp-size", str(plan["dp"])]  # SGLang 0.5.23: replaces --dp-size N --enable-dp-attention
    if plan["ep"] > 1:
        argv += ["--ep-size", str(plan["ep"])]
    if plan["dp"] > 1 and plan["ep"] > 1:  # tokens reach their experts by DeepEP all-to-all, as specplan prices
        # them (docs/parallel.md): normal kernels for prefill, low-latency for decode (auto: by forward mode; a
        # disaggregated worker gets its role's); dense layers and the LM head per DP rank, as the large-EP recipes
        argv += ["--moe-a2a-backend", "deepep", "--deepep-mode", plan.get("deepep_mode") or "auto",
                 "--moe-dense-tp-size", "1", "--enable-dp-lm-head"]
    argv += ["--max-running-requests", str(plan["max_batch"]),
             "--chunked-prefill-size", str(plan["token_budget"]),
             "--kv-cache-dtype", KV_DTYPES["sglang"].get(plan["kv_dtype"], "auto")]
    q, note = _quant_note(plan, "sglang")
    if q:
        argv += ["--quantization", q]
    if note:
        notes.append(note)
    method = _method("sglang", plan)
    if method:
        d = plan["draft_len"]  # with a D schedule too: the D the answer priced at its concurrency
        argv += ["--speculative-algorithm", method]
        if plan["draft_repo"] and plan["mechanism"] in NEEDS_DRAFT:
            argv += ["--speculative-draft-model-path", plan["draft_repo"]]
        tokens = plan["tree_tokens"] if plan["tree_topk"] > 1 else d + 1
        if method == "NGRAM":  # sglang 0.5.23 arg_groups/speculative_hook.py _handle_ngram: eagle_topk is set to
            if plan["dp"] > 1:  # speculative_ngram_max_bfs_breadth (default 10), and dp attention is refused
                raise SpecplanError("launch: SGLang's n-gram speculation does not run with DP attention "
                                    "(--attn-dp-size; speculative_hook.py _handle_ngram): use --engine vllm or a "
                                    "layout without DP")
            argv += ["--speculative-ngram-max-bfs-breadth", str(plan["tree_topk"]),
                     "--speculative-num-draft-tokens", str(tokens)]
        elif method in ("DFLASH", "DSPARK"):  # one drafting step; the block is the verify window (_handle_dflash,
            argv += ["--speculative-num-steps", "1", "--speculative-num-draft-tokens", str(d + 1)]  # _handle_dspark)
        else:
            argv += ["--speculative-num-steps", str(d), "--speculative-eagle-topk", str(plan["tree_topk"]),
                     "--speculative-num-draft-tokens", str(tokens)]
        if plan["d_schedule"]:
            notes.append(f"SGLang {fl['version']} has no per-batch-size D schedule flag: emitted the answer's D = {d}, "
                         f"the D priced at its concurrency (the schedule's D run from "
                         f"{min(r[2] for r in plan['d_schedule'])} to {max(r[2] for r in plan['d_schedule'])})")
    return Launch("sglang", fl["version"], argv, notes=notes)


def trtllm_options(plan: dict) -> tuple[dict, list[str]]:
    """The extra LLM-API YAML of trtllm-serve (as a dict) and notes."""
    notes = []
    opts = {"tensor_parallel_size": plan["tp"] * plan["dp"], "max_batch_size": per_dp_rank(plan),
            "max_num_tokens": plan["token_budget"],
            "kv_cache_config": {"dtype": KV_DTYPES["trtllm"].get(plan["kv_dtype"], "auto")},
            # a graph for every decode batch up to the default cap of 128, as engine_profiles/trtllm.yaml prices
            # them (padded to the next captured size); without padding only batches 1-32, 64 and 128 replay a
            # graph and the others run eagerly
            "cuda_graph_config": {"enable_padding": True}}
    if plan["pp"] > 1:
        opts["pipeline_parallel_size"] = plan["pp"]
    if plan["dp"] > 1:
        opts["enable_attention_dp"] = True
        notes.append(f"max_batch_size is per attention-DP rank (each rank's executor schedules its own requests): "
                     f"the answer's {plan['max_batch']} requests over {plan['dp']} ranks")
    if plan["ep"] > 1:
        opts["moe_expert_parallel_size"] = plan["ep"]
        opts["moe_tensor_parallel_size"] = plan["tp"] * plan["dp"] // plan["ep"]
    _, note = _quant_note(plan, "trtllm")
    if note:
        notes.append(note)
    method = _method("trtllm", plan)
    if method:
        sc = {"decoding_type": method, "max_draft_len": plan["draft_len"]}
        if plan["draft_repo"] and plan["mechanism"] in NEEDS_DRAFT:
            sc["speculative_model"] = plan["draft_repo"]
        if plan["d_schedule"]:
            sc["max_draft_len"] = plan["d_schedule"][0][2]
            # keys are upper batch limits and speculation stops above the last (llm_args.py @ 0004396): the last
            # band reaches the largest batch the server admits
            sched = {int(hi): int(dd) for _, hi, dd in plan["d_schedule"]}
            last = max(sched)
            sched[max(last, per_dp_rank(plan))] = sched.pop(last)
            sc["draft_len_schedule"] = sched
            if max(r[2] for r in plan["d_schedule"]) != plan["d_schedule"][0][2]:
                raise SpecplanError("launch: TensorRT-LLM's draft_len_schedule needs its largest D at batch 1 (its "
                                    "smallest batch key must equal max_draft_len)")
        if plan["mechanism"] == "mtp":
            notes.append("MTP: max_draft_len sets the MTP depth (num_nextn_predict_layers is deprecated in "
                         "llm_args.py and filled from the checkpoint)")
        if plan["tree_topk"] > 1 and plan["mechanism"] in ("eagle3", "mtp"):
            sc["use_dynamic_tree"] = True
            sc["dynamic_tree_max_topK"] = plan["tree_topk"]
            sc["max_total_draft_tokens"] = max(plan["tree_tokens"] - 1, plan["draft_len"])
        opts["speculative_config"] = sc
    return opts, notes


def build_trtllm(plan: dict) -> Launch:
    """`trtllm-serve MODEL --config extra-llm-api.yaml` plus that YAML."""
    fl = flag_list("trtllm")
    opts, notes = trtllm_options(plan)
    return Launch("trtllm", fl["version"], ["trtllm-serve", plan["hf_repo"], "--config", "extra-llm-api.yaml"],
                  files={"extra-llm-api.yaml": opts}, notes=notes)


def _dynamo_roles(plan: dict) -> list[tuple[str, dict]]:
    """(role, pool) of each Dynamo worker service: prefill and decode for a disaggregated plan, one aggregated
    worker (its replicas) otherwise."""
    if plan["mode"] == "disagg" and plan["pools"]:
        return [(role, plan["pools"][role]) for role in ("prefill", "decode")]
    return [("agg", {"replicas": plan.get("replicas", 1)})]


def _dynamo_worker_plan(plan: dict, role: str, pool: dict, prefill_speculates: bool) -> dict:
    """The plan one Dynamo worker runs: the pool's layout; a prefill worker runs no decode batch (its batch is the
    prompts a token budget holds) and speculates only where its backend needs it (SGLang: `rules` of dynamo.json)."""
    sub = dict(plan)
    for k in ("tp", "dp", "ep", "pp"):
        sub[k] = int(pool.get(k, plan[k] if role != "prefill" else (plan["tp"] if k == "tp" else 1)))
    if role in ("prefill", "decode"):  # SGLang workers with DeepEP: normal kernels for prefill, low-latency decode
        sub["deepep_mode"] = "normal" if role == "prefill" else "low_latency"
    if role == "prefill":
        sub["max_batch"] = int(pool.get("max_batch", max(1, plan["token_budget"] // max(1, plan["isl"] or 1024))))
        if not prefill_speculates:
            sub.update(mechanism="none", draft_len=0, d_schedule=None)
    return sub


def _dynamo_args(backend: str, w: dict, sub: dict, role: str, plan: dict, files: dict, notes: list) -> list[str]:
    """A Dynamo worker's argv: the backend engine's flags for `sub` and the role flags of flags/dynamo.json."""
    if backend == "vllm":
        args = [w["model_flag"], plan["hf_repo"]] + build_vllm(sub, worker=True).argv
    elif backend == "sglang":
        args = build_sglang(sub, worker=True).argv + ["--served-model-name", plan["hf_repo"]]
    else:
        opts, n = trtllm_options(sub)
        if role != "agg":
            opts["cache_transceiver_config"] = {"backend": "DEFAULT"}  # as Dynamo's trtllm engine_configs
        files[f"{role}.yaml"] = opts
        notes += n
        args = [w["model_flag"], plan["hf_repo"], "--served-model-name", plan["hf_repo"],
                "--extra-engine-args", f"./{role}.yaml"]
    return args + w["role_flags"][role]


def build_dynamo(plan: dict, backend: str = "sglang", gpus_per_node: int = 8) -> Launch:
    """A DynamoGraphDeployment: a frontend and a prefill and a decode worker service for a disaggregated plan, or
    one aggregated worker service (Dynamo's agg.yaml) for an aggregated one."""
    dyn = flag_list("dynamo")
    if backend not in dyn["workers"]:
        raise SpecplanError(f"launch: dynamo backend must be one of {', '.join(dyn['workers'])}, got {backend!r}")
    w = dyn["workers"][backend]
    notes, services, files = [], {}, {}
    services["Frontend"] = {"componentType": "frontend", "replicas": 1,
                            "extraPodSpec": {"mainContainer": {"image": w["image"]}}}
    for role, pool in _dynamo_roles(plan):
        sub = _dynamo_worker_plan(plan, role, pool, prefill_speculates=backend == "sglang")
        gpus = sub["tp"] * sub["dp"] * sub["pp"]
        svc = {"envFromSecret": "hf-token-secret", "componentType": "worker",
               **({"subComponentType": role} if role != "agg" else {}),
               "replicas": int(pool.get("replicas", 1)), "resources": {"limits": {"gpu": str(min(gpus, gpus_per_node))}},
               "extraPodSpec": {"mainContainer": {"image": w["image"], "workingDir": w["workingDir"],
                                                  "command": ["python3", "-m", w["module"]],
                                                  "args": _dynamo_args(backend, w, sub, role, plan, files, notes)}}}
        if gpus > gpus_per_node:
            svc["multinode"] = {"nodeCount": math.ceil(gpus / gpus_per_node)}
        services["worker" if role == "agg" else role] = svc
    if backend == "sglang" and plan["mechanism"] != "none" and plan["mode"] == "disagg":
        notes.append("the SGLang prefill worker runs the same speculative flags as the decode worker: its decode side "
                     "builds the first draft input from the draft state the prefill side sends only when it "
                     "speculates too (sglang 0.5.23 disaggregation/prefill.py)")
    mode = "disagg" if plan["mode"] == "disagg" and plan["pools"] else "agg"
    name = f"specplan-{plan['model']}-{mode}".lower().replace(".", "-").replace("_", "-")[:63]
    dgd = {"apiVersion": dyn["api_version"], "kind": dyn["kind"], "metadata": {"name": name},
           "spec": {"backendFramework": backend, "services": services}}
    files = {"dynamo-graph-deployment.yaml": dgd, **files}
    return Launch("dynamo", dyn["version"], ["kubectl", "apply", "-f", "dynamo-graph-deployment.yaml"],
                  files=files, notes=notes + [f"workers run {backend} ({flag_list(backend)['version']})"])


def build(engine: str, plan: dict, backend: str | None = None) -> Launch:
    """The launch of `plan` on `engine` (vllm | sglang | trtllm | dynamo)."""
    if engine == "vllm":
        launch = build_vllm(plan)
    elif engine == "sglang":
        launch = build_sglang(plan)
    elif engine == "trtllm":
        launch = build_trtllm(plan)
    elif engine == "dynamo":
        launch = build_dynamo(plan, backend or (plan.get("engine") if plan.get("engine") in METHODS else "sglang"))
        launch.notes += instruct_note(plan)
        return launch
    else:
        raise SpecplanError(f"launch: --emit/--engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    launch.notes += deployment_note(plan)
    return launch


def deployment_note(plan: dict) -> list[str]:
    """Notes when one engine command is not the whole answer: a disaggregated answer (its prefill and decode pools),
    an aggregated one with several identical replicas (recommend --gpus); a draft trained on an Instruct model
    launched beside a base checkpoint."""
    return instruct_note(plan) + _pools_note(plan)


def instruct_note(plan: dict) -> list[str]:
    """Notes on the checkpoint the command serves: a draft trained on an Instruct model beside a base checkpoint; a
    model id that is no Hugging Face org/name repo (an imported config's folder name)."""
    dr, tr = str(plan.get("draft_repo") or ""), str(plan.get("hf_repo") or "")
    out = []
    if "/" not in tr:
        out.append(f"'{tr}' is not a Hugging Face org/name repo (an imported profile takes its folder's name when the "
                   f"config names none): replace it with your checkpoint's repo or path")
    if plan["mechanism"] != "none" and "instruct" in dr.lower() and "instruct" not in tr.lower():
        out.append(f"the draft {dr} was trained on an Instruct model and the command serves {tr}: serve the Instruct "
                   f"checkpoint the draft was trained on (the acceptance priced is the draft's on it)")
    return out


def _pools_note(plan: dict) -> list[str]:
    """deployment_note's pools / replicas part."""
    per = plan["tp"] * plan["pp"] * plan["dp"]
    if plan["mode"] == "disagg" and plan["pools"]:
        x, y = (int(plan["pools"][k].get("replicas", 1)) for k in ("prefill", "decode"))
        units = plan.get("units", 1)
        return [f"the answer is disaggregated ({x}P{y}D, {x + y} x {per} GPUs"
                + (f"; {units} such units side by side, {units * (x + y) * per} GPUs" if units > 1 else "")
                + f"): this command is one decode instance (max batch {plan['max_batch']} each); the prefill pool "
                f"and the KV transfer between them need a disaggregated deployment (--engine dynamo writes one)"]
    r = plan.get("replicas", 1)
    if r <= 1:
        return []
    return [f"the answer runs {r} replicas of this server ({r} x {per} GPUs): start one per group of {per} GPUs "
            f"and spread the requests over them; the limits above (max batch {plan['max_batch']}) are per replica"]


def render(launch: Launch) -> str:
    """The command (shell-quoted), each config file as YAML under a `# file:` line, then notes as comments."""
    out = [f"# {launch.engine}: {launch.version}"]
    for name, body in launch.files.items():
        out.append(f"# file: {name}")
        out.append(yaml.safe_dump(body, sort_keys=False, default_flow_style=False).rstrip())
    out.append(" ".join(shlex.quote(a) for a in launch.argv))
    out += [f"# note: {n}" for n in launch.notes]
    return "\n".join(out)


def _kind_ok(kind: str, value) -> bool:
    """Does `value` (a CLI token or a YAML value) have the list's kind?"""
    if kind == "bool":
        return value is None or isinstance(value, bool)
    if kind == "int":
        return (isinstance(value, int) and not isinstance(value, bool)) or (isinstance(value, str) and value.isdigit())
    if kind == "float":
        try:
            float(value)
            return not isinstance(value, bool)
        except (TypeError, ValueError):
            return False
    if kind == "json":
        try:
            return isinstance(json.loads(value), (dict, list))
        except (TypeError, ValueError):
            return False
    if kind == "list":
        return isinstance(value, (list, tuple))
    if kind == "object":
        return isinstance(value, dict)
    if kind == "dict_int_int":  # a launch read back from JSON has its int keys as digit strings
        return isinstance(value, dict) and all((isinstance(k, int) or (isinstance(k, str) and k.isdigit()))
                                               and isinstance(v, int) for k, v in value.items())
    return isinstance(value, str)


def check_argv(argv: list[str], flags: dict) -> list[str]:
    """Problems of a flag list against an engine's extracted flags: unknown flags, wrong kinds, bad choices."""
    bad, i = [], 0
    while i < len(argv):
        a = argv[i]
        if not a.startswith("--"):
            bad.append(f"positional {a!r} where a flag was expected")
            i += 1
            continue
        spec = flags.get(a)
        if spec is None:
            bad.append(f"{a}: not a flag of this engine")
            i += 1
            continue
        if spec.get("deprecated"):
            bad.append(f"{a}: deprecated in this engine version")
        if spec["kind"] == "bool":
            i += 1
            continue
        val = argv[i + 1] if i + 1 < len(argv) else None
        if val is None or not _kind_ok(spec["kind"], val):
            bad.append(f"{a} {val!r}: not a {spec['kind']}")
        elif spec.get("choices") and val not in [str(c) for c in spec["choices"]]:
            bad.append(f"{a} {val!r}: not one of the engine's choices")
        i += 2
    return bad


def check_keys(obj: dict, spec: dict, where: str = "") -> list[str]:
    """Problems of a YAML dict against a nested key spec ({key: {kind, choices, keys}})."""
    bad = []
    for k, v in obj.items():
        s = spec.get(k)
        if s is None:
            bad.append(f"{where}{k}: not a key of this engine")
            continue
        if not _kind_ok(s["kind"], v):
            bad.append(f"{where}{k} = {v!r}: not a {s['kind']}")
        elif s.get("choices") and v not in s["choices"]:
            bad.append(f"{where}{k} = {v!r}: not one of the engine's choices")
        if s["kind"] == "object" and isinstance(v, dict) and "keys" in s:
            bad += check_keys(v, s["keys"], f"{where}{k}.")
    return bad


def _check_tree(obj, spec, where="") -> list[str]:
    """Problems of a Dynamo YAML against the key tree of flags/dynamo.json."""
    bad = []
    if not isinstance(obj, dict):
        return [f"{where}: expected a mapping"]
    for k, v in obj.items():
        s = spec.get(k, spec.get("*"))
        if s is None:
            bad.append(f"{where}{k}: not a key of a DynamoGraphDeployment")
        elif isinstance(s, str):
            if not _kind_ok(s, v):
                bad.append(f"{where}{k} = {v!r}: not a {s}")
        elif "kind" in s:
            if not _kind_ok(s["kind"], v) or (s.get("choices") and v not in s["choices"]):
                bad.append(f"{where}{k} = {v!r}: not allowed")
        else:
            bad += _check_tree(v, s, f"{where}{k}.")
    return bad


def check_launch(launch: Launch) -> list[str]:
    """Every flag, key, value kind and choice of a launch against the committed lists; [] when all hold."""
    if launch.engine == "vllm":
        fl = flag_list("vllm")
        bad = check_argv(launch.argv[3:], fl["flags"])
        if "--speculative-config" in launch.argv:
            sc = json.loads(launch.argv[launch.argv.index("--speculative-config") + 1])
            bad += check_keys(sc, {k: {**v, "kind": "int" if v["kind"] == "int" else v["kind"]}
                                   for k, v in fl["speculative_config"].items()}, "speculative_config.")
        return bad
    if launch.engine == "sglang":
        return check_argv(launch.argv[3:], flag_list("sglang")["flags"])
    if launch.engine == "trtllm":
        fl = flag_list("trtllm")
        return check_argv(launch.argv[2:], fl["cli_flags"]) + check_keys(launch.files["extra-llm-api.yaml"],
                                                                         fl["llm_api"])
    if launch.engine == "dynamo":
        dyn = flag_list("dynamo")
        dgd = launch.files["dynamo-graph-deployment.yaml"]
        bad = _check_tree(dgd, dyn["keys"])
        backend = dgd["spec"]["backendFramework"]
        w = dyn["workers"][backend]
        workers = {name: svc for name, svc in dgd["spec"]["services"].items() if svc.get("componentType") == "worker"}
        for name, svc in workers.items():
            args = svc["extraPodSpec"]["mainContainer"]["args"]
            flags = {**w["own_flags"]}
            if backend in ("vllm", "sglang"):
                flags = {**flag_list(backend)["flags"], **flags}
            bad += [f"{name}: {b}" for b in check_argv(args, flags)]
        bad += dynamo_rule_problems(backend, workers)
        for fname, body in launch.files.items():
            if fname != "dynamo-graph-deployment.yaml":
                bad += [f"{fname}: {b}" for b in check_keys(body, flag_list("trtllm")["llm_api"])]
        return bad
    return [f"unknown engine {launch.engine}"]


def _flag_values(args: list[str]) -> dict[str, str | None]:
    """{flag: its value (None for a bare switch)} of an argv of --flags."""
    out, i = {}, 0
    while i < len(args):
        if args[i].startswith("--"):
            val = args[i + 1] if i + 1 < len(args) and not args[i + 1].startswith("--") else None
            out[args[i]] = val
            i += 2 if val is not None else 1
        else:
            i += 1
    return out


def dynamo_rule_problems(backend: str, workers: dict) -> list[str]:
    """The cross-flag rules of flags/dynamo.json (`rules`, each with its source) that a Dynamo graph's workers
    break: a flag a role requires, flags a backend needs alike in its prefill and decode workers."""
    bad = []
    by_role = {svc.get("subComponentType", "agg"): _flag_values(svc["extraPodSpec"]["mainContainer"]["args"])
               for svc in workers.values()}
    for rule in flag_list("dynamo").get("rules", []):
        if rule["backend"] != backend:
            continue
        if "requires" in rule and rule["role"] in by_role:
            bad += [f"{rule['role']} worker: {f} is required ({rule['source'].split(':')[0]})"
                    for f in rule["requires"] if f not in by_role[rule["role"]]]
        if "same_in_roles" in rule and {"prefill", "decode"} <= set(by_role):
            p, d = by_role["prefill"], by_role["decode"]
            bad += [f"prefill and decode workers differ in {f}: {p.get(f)!r} vs {d.get(f)!r} "
                    f"({rule['source'].split(' (')[0]})" for f in rule["same_in_roles"]
                    if (f in p) != (f in d) or p.get(f) != d.get(f)]
    return bad


def engine_notes(priced: str | None, launched: str, files: dict) -> list[str]:
    """A note when the engine that priced an answer is not the one it is launched on (its batch limits and D come
    from the pricing engine's model), or when the ideal engine (no host, launch or scheduling cost) priced it."""
    target = launched
    if launched == "dynamo":
        target = (files.get("dynamo-graph-deployment.yaml") or {}).get("spec", {}).get("backendFramework", "sglang")
    if priced in (None, "ideal"):
        return [f"the answer was priced with the ideal engine (no host, launch or scheduling cost): its batch and "
                f"concurrency may not hold on {target}; price it with --engine {target}"]
    if priced != target:
        return [f"the answer was priced with {priced}'s engine profile and is launched on {target}: its batch "
                f"limits come from {priced}'s pricing; price it with --engine {target} for {target}'s"]
    return []
