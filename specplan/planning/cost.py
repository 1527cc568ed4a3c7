"""Power, energy and dollars per token of an operating point (vectorized over numpy grids).

Power per GPU from the kernels' utilization: idle + (TDP - idle) x min(1, floor + c x u_compute + m x u_memory),
where u_compute = achieved FLOP/s / dense peak and u_memory = HBM bytes/s / peak bandwidth (PowerSpec in the
hardware profile; every constant sourced there). The work of a serving point per output token is the decode step's
FLOPs and bytes (all 1 + D verified tokens: rejected drafts are priced) divided by the tokens it yields (B x AL),
plus one prefill of ISL tokens per OSL output tokens; its rate is tokens/s/GPU. The draft phase is timed (it is in
tokens/s/GPU) but its own work is not added (one-layer heads are launch-bound: they run at the active floor).
Dollars: $/Mtok = $/GPU-hour / (tokens/s/GPU x 3600 / 1e6) with InferenceX's all-in TCO prices (power included);
an energy term is added only for a price given without power (`kwh_usd`).
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from pathlib import Path

import numpy as np
import yaml

from specplan.core.errors import SpecplanError
from specplan.core.records import Record, record
from specplan.model.memory import kv_bytes_per_seq, routed_expert_bytes, weight_bytes
from specplan.model.step import attended_keys
from specplan.model.parallel import Layout, layout_for
from specplan.profiles.model import ATTENTION_MIXERS
from specplan.costs.shapes import layer_gemms, lm_head_gemm

PRICES_YAML = Path(__file__).with_name("prices.yaml")
OBJECTIVES = ("tokens-per-gpu", "cost", "energy")


@record
class DevicePrice:
    """One device's entry of prices.yaml: all-in $/GPU-hour by tier, and the facility PUE."""

    gpu_hour_usd: dict
    pue: float


@record
class PriceTable:
    """prices.yaml: the devices' prices, the default tier and PUE, and where the numbers come from."""

    devices: dict
    default_tier: str
    default_pue: float
    source: str

    @classmethod
    def parse(cls, raw: dict) -> "PriceTable":
        """The table from the parsed YAML file (its fields we read)."""
        devices = {k: DevicePrice(dict(v["gpu_hour_usd"]), float(v["pue"])) for k, v in raw["devices"].items()}
        return cls(devices, raw["default_tier"], float(raw["default_pue"]), raw["source"])


@lru_cache(maxsize=1)
def price_table() -> PriceTable:
    """The price / PUE defaults (prices.yaml): per hardware id, $/GPU-hour tiers, all-in kW, PUE, sources."""
    return PriceTable.parse(yaml.load(PRICES_YAML.read_text(),
                                      Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))  # libyaml when built


def check_tier(tier: str | None) -> None:
    """Refuse a price tier no device has (--price-tier), in one line naming the tiers."""
    tiers = sorted({k for d in price_table().devices.values() for k in d.gpu_hour_usd})
    if tier is not None and tier not in tiers:
        raise SpecplanError(f"--price-tier: must be one of {', '.join(tiers)}, got '{tier}'")


@record
class Prices(Record):
    """A device's default price: all-in $/GPU-hour of the tier, the facility PUE, the tier, and the source."""

    gpu_hour_usd: float
    pue: float
    tier: str
    source: str


def prices_for(hw_id: str, tier: str | None = None) -> Prices:
    """{gpu_hour_usd, pue, tier, source} of a device, or a one-line error naming the devices with prices."""
    t = price_table()
    dev = t.devices.get(hw_id)
    if dev is None:
        raise SpecplanError(f"cost: no default $/GPU-hour for hardware '{hw_id}' (have {', '.join(t.devices)}); "
                            f"give --gpu-hour-usd")
    tier = tier or t.default_tier
    if tier not in dev.gpu_hour_usd:
        raise SpecplanError(f"cost: price tier must be one of {', '.join(dev.gpu_hour_usd)}, got '{tier}'")
    return Prices(float(dev.gpu_hour_usd[tier]), float(dev.pue), tier, t.source)


def step_work(model, hw, prec, layout: Layout | None, batch, q_len, context_len, routing: str = "random"):
    """(FLOPs, HBM bytes) of one step on one GPU: weights read (routed experts as touched), KV read, GEMM and
    attention FLOPs for `batch` sequences (all DP ranks) of `q_len` new tokens at `context_len` cached tokens."""
    from specplan.costs.moe import touched_experts

    lay = layout_for(1, layout)
    tp = lay.tp
    b = np.asarray(batch, dtype=float)
    q = np.asarray(q_len, dtype=float)
    ctx = np.asarray(context_len, dtype=float)
    b_rank = np.asarray(lay.per_rank_batch(b), dtype=float)
    tokens = b_rank * q  # tokens through one rank's dense layers
    head_dim = (model.mla.kv_lora_rank + model.mla.qk_rope_head_dim / 2 if model.mla is not None else model.head_dim)
    dense_elems, attn_keys, moe_layers = 0.0, 0.0, 0
    for g in model.groups():
        dense_elems += g.count * sum(s.n * s.k for s in layer_gemms(model, g, tp))
        if g.mixer in ATTENTION_MIXERS:  # keys x head width each query of these layers attends
            hd = g.head_dim if (g.head_dim and model.mla is None) else head_dim
            attn_keys = attn_keys + g.count * hd * attended_keys(model, g.mixer, ctx, 1.0)  # as the step reads
        if g.ffn == "moe":
            moe_layers += g.count
    lm = lm_head_gemm(model, tp)
    dense_elems = (dense_elems / lay.pp) + lm.n * lm.k
    flops = 2.0 * dense_elems * tokens
    heads_dev, _ = model.heads_per_device(tp)
    # MLA (absorbed): QK over kv_lora_rank + rope dims, PV over kv_lora_rank -> 2 x (2 x lora + rope) per head
    flops = flops + 4.0 * attn_keys / lay.pp * heads_dev * tokens
    w_bytes = weight_bytes(model, tp, prec, lay)
    kv = kv_bytes_per_seq(model, tp, prec.kv, ctx) * b_rank / lay.pp
    if model.moe is not None and moe_layers:
        moe = model.moe
        routed = routed_expert_bytes(model, lay, prec.w("moe")) * moe_layers / lay.pp  # this GPU's experts
        tok_all = b * q  # every token of the instance is routed over all experts
        frac = touched_experts(tok_all, moe.num_experts, moe.top_k, routing) / moe.num_experts
        w_bytes = (w_bytes - routed) + routed * frac
        mats = 3 if model.gated_ffn else 2
        width = moe.latent_size or model.hidden_size
        flops = flops + 2.0 * mats * width * moe.expert_ffn_size * moe.top_k * moe_layers * tok_all / lay.gpus
    return flops, w_bytes + kv


def power_w(spec, u_compute, u_memory) -> np.ndarray:
    """Board power (W) per GPU at the given utilizations (each clipped to [0, 1]); always in [idle, TDP]."""
    uc = np.clip(np.asarray(u_compute, dtype=float), 0.0, 1.0)
    um = np.clip(np.asarray(u_memory, dtype=float), 0.0, 1.0)
    frac = np.clip(spec.active_floor + spec.compute * uc + spec.memory * um, 0.0, 1.0)
    return spec.idle_w + (spec.tdp_w - spec.idle_w) * frac


@record
class OperatingPoint:
    """Where a deployment runs (numbers or broadcast arrays): output tokens/s per GPU, the decode batch, D, the
    acceptance length AL, the decode context (tokens), and the request lengths (prefill work counted when given)."""

    tokens_per_s_per_gpu: object
    batch: object
    context_len: object
    draft_len: object = 0
    acceptance_length: object = 1.0
    isl: int | None = None
    osl: int | None = None


def utilization(model, hw, prec, layout, point: OperatingPoint):
    """(u_compute, u_memory) averaged over a deployment's GPUs at a throughput: decode work per output token
    (the verify step of B x (1 + D) tokens over the B x AL tokens it yields) plus prefill work per output token."""
    tokens_per_s_per_gpu, batch, draft_len = point.tokens_per_s_per_gpu, point.batch, point.draft_len
    acceptance_length, context_len, isl, osl = point.acceptance_length, point.context_len, point.isl, point.osl
    lay = layout_for(1, layout)
    rate = np.asarray(tokens_per_s_per_gpu, dtype=float)
    b = np.maximum(np.asarray(batch, dtype=float), 1.0)
    d = np.asarray(draft_len, dtype=float)
    al = np.maximum(np.asarray(acceptance_length, dtype=float), 1.0)
    f_dec, by_dec = step_work(model, hw, prec, lay, b, 1.0 + d, context_len)
    per_tok = lay.gpus / (b * al)  # GPU-steps of this instance per output token
    f_tok, by_tok = f_dec * per_tok, by_dec * per_tok
    if isl is not None and osl is not None and osl > 0:
        f_pf, by_pf = step_work(model, hw, prec, lay, 1.0, float(isl), float(isl) / 2.0)
        f_tok = f_tok + f_pf * lay.gpus / float(osl)
        by_tok = by_tok + by_pf * lay.gpus / float(osl)
    uc = rate * f_tok / hw.peak(prec.compute)
    um = rate * by_tok / hw.mem_bandwidth_bytes_s
    return uc, um


@record
class Energy(Record):
    """Energy and cost of operating points (arrays, or floats): board power per GPU (W), J per output token, the
    facility PUE, output tokens/s per MW with it; with a price, $ per million output tokens, the $/GPU-hour and
    where it comes from; of a priced point, the compute and memory utilizations (clipped to [0, 1])."""

    power_w_per_gpu: object
    joules_per_token: object
    pue: float
    tokens_per_s_per_mw: object
    usd_per_mtok: object = None
    gpu_hour_usd: float | None = None
    price_source: str | None = None
    u_compute: object = None
    u_memory: object = None

    OPTIONAL = ("usd_per_mtok", "gpu_hour_usd", "price_source", "u_compute", "u_memory")


def energy_metrics(hw, power, tokens_per_s_per_gpu, *, gpu_hour_usd=None, kwh_usd=None, pue=None,
                   tier=None) -> Energy:
    """J per output token, tokens/s per MW (facility, with PUE), and $ per million output tokens (arrays)."""
    rate = np.asarray(tokens_per_s_per_gpu, dtype=float)
    p = np.asarray(power, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        j_tok = np.where(rate > 0, p / rate, np.nan)  # no tokens: no value (null in JSON), never infinity
    price = None
    check_tier(tier)  # a bad tier is an error even where the device has no price
    try:
        price = prices_for(hw.id, tier)
    except SpecplanError:
        if gpu_hour_usd is None:
            price = None
    pue_v = float(pue if pue is not None else (price.pue if price else price_table().default_pue))
    out = Energy(p, j_tok, pue_v, np.where(p > 0, rate * 1e6 / (p * pue_v), 0.0))
    usd_h = gpu_hour_usd if gpu_hour_usd is not None else (price.gpu_hour_usd if price else None)
    if usd_h is not None:
        with np.errstate(divide="ignore", invalid="ignore"):
            usd = np.where(rate > 0, usd_h / (rate * 3600.0 / 1e6), np.nan)
        if kwh_usd is not None:
            if gpu_hour_usd is None:
                raise SpecplanError("cost: --kwh-usd adds energy to a price given without power: give "
                                    "--gpu-hour-usd too (the default prices are all-in TCO and include power)")
            usd = usd + j_tok * pue_v * kwh_usd / 3.6  # J/tok x 1e6 tok / 3.6e6 J/kWh
        out = replace(out, usd_per_mtok=usd, gpu_hour_usd=float(usd_h),
                      price_source="--gpu-hour-usd" if gpu_hour_usd is not None else f"{price.tier}: {price.source}")
    return out


def point_energy(model, hw, prec, layout, point: OperatingPoint, **price) -> Energy | None:
    """Power, J/token, tokens/s/MW and $/Mtok of one operating point (arrays broadcast); None without a
    power model for the device. `price`: energy_metrics' price options."""
    if hw.power is None:
        return None
    uc, um = utilization(model, hw, prec, layout, point)
    p = power_w(hw.power, uc, um)
    out = energy_metrics(hw, p, point.tokens_per_s_per_gpu, **price)
    return replace(out, u_compute=np.clip(uc, 0, 1), u_memory=np.clip(um, 0, 1))


def scalars(d: dict | None) -> dict | None:
    """A metrics dict with one-element arrays turned into floats (for JSON)."""
    if d is None:
        return None
    return {k: (float(np.asarray(v).reshape(-1)[0]) if isinstance(v, np.ndarray) else v) for k, v in d.items()}


def objective_value(objective: str, row) -> float:
    """The number an objective maximizes: tokens/s/GPU, -$/Mtok, or -J/token (of a row with those fields)."""
    if objective == "tokens-per-gpu":
        return row.tokens_per_s_per_gpu
    key = {"cost": "usd_per_mtok", "energy": "joules_per_token"}.get(objective)
    if key is None:
        raise SpecplanError(f"objective: must be one of {', '.join(OBJECTIVES)}, got '{objective}'")
    value = getattr(row, key)  # the field the objective names
    if value is None:
        raise SpecplanError(f"objective {objective}: no {key} for this point (hardware without a power model or a "
                            f"price: give --gpu-hour-usd)")
    return -value


def serving_energy(model, hardware, workload, r, draft_len, *, tp=1, dtype=None, kv_dtype=None,
                   price: dict | None = None) -> Energy | None:
    """Energy and cost arrays of a `serve` result grid (decode batch, AL and tokens/s/GPU per point); None when
    the device has no power model."""
    from specplan.costs.precision import resolve_precision
    from specplan.profiles.registry import load_hardware, load_model

    m, hw = load_model(model), load_hardware(hardware)
    if hw.power is None:
        return None
    prec = resolve_precision(m, hw, dtype, kv_dtype)
    shape = np.broadcast(np.asarray(r.tokens_per_s_per_gpu), np.asarray(draft_len)).shape
    grid = lambda v: np.broadcast_to(np.asarray(v, dtype=float), shape)  # noqa: E731
    lay = tp if isinstance(tp, Layout) else Layout(tp=tp)  # a serving layout (DP attention, EP) as priced
    point = OperatingPoint(grid(r.tokens_per_s_per_gpu), np.maximum(grid(r.decode_batch), 1.0),
                           workload.decode_context, np.broadcast_to(draft_len, shape), grid(r.acceptance_length),
                           workload.isl, workload.osl)
    return point_energy(m, hw, prec, lay, point, **(price or {}))


ENERGY_KEYS = ("power_w_per_gpu", "joules_per_token", "tokens_per_s_per_mw", "usd_per_mtok")


def row_energy(e: Energy | None, i, j) -> dict:
    """The energy fields of grid point (i, j) as floats by name (empty without a power model; $/Mtok only with a
    price), a serving row's energy fields."""
    if e is None:
        return {}
    return {k: float(np.asarray(v)[i, j]) for k in ENERGY_KEYS if (v := getattr(e, k)) is not None}


def predict_energy(model, hw, prec, layout, baseline: OperatingPoint, speculative: OperatingPoint | None = None,
                   price: dict | None = None) -> dict | None:
    """{'baseline': {...}, 'speculative': {...}} energy and cost of a predicted point (floats); None without a
    power model. With the points' isl/osl the prefill work is included (serving); without, decode steps only. No
    speculative entry at D = 0."""
    if hw.power is None:
        return None
    base = scalars(point_energy(model, hw, prec, layout, baseline, **(price or {})))
    if speculative is None or not speculative.draft_len > 0:
        return {"baseline": base}
    return {"baseline": base, "speculative": scalars(point_energy(model, hw, prec, layout, speculative,
                                                                  **(price or {})))}


@record
class PriceOptions(Record):
    """The price options given (None: the default): $/GPU-hour, $/kWh added to it, facility PUE, price tier; as a
    mapping, the given ones by name (energy_metrics' keyword arguments)."""

    gpu_hour_usd: float | None = None
    kwh_usd: float | None = None
    pue: float | None = None
    tier: str | None = None

    OPTIONAL = ("gpu_hour_usd", "kwh_usd", "pue", "tier")


def price_options(gpu_hour_usd=None, kwh_usd=None, pue=None, tier=None) -> PriceOptions:
    """The price options given (a $/GPU-hour >= 0, a $/kWh > 0, a PUE > 0, a tier), checked, as this module takes
    them; a GPU-hour may cost 0 (owned GPUs: energy only, with a $/kWh)."""
    check_tier(tier)
    for flag, v, at_least_zero in (("gpu-hour-usd", gpu_hour_usd, True), ("kwh-usd", kwh_usd, False),
                                   ("pue", pue, False)):
        if v is not None and not (v >= 0 if at_least_zero else v > 0):
            raise SpecplanError(f"--{flag}: must be {'>=' if at_least_zero else '>'} 0, got {v:g}")
    return PriceOptions(gpu_hour_usd, kwh_usd, pue, tier)
