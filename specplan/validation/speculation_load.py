"""`specplan validate-speculation`: speculative speedups under load, predicted against published sweeps.

Scores the setups of reference/speculation_load/setups.yaml (rows of specdec_sweeps.csv, 3+ load levels, devices
specplan profiles) through the aggregated serving path (specplan.serving.aggregated) with each engine's
speculative round (specplan.speculation.round). One engine number is fitted: `spec_host_per_seq_s`, the host
time per running sequence per round, per engine, with each whole setup left out in turn (fitted on the other
setups of the same engine; a setup whose engine has no other setup gets 0, reported as unfitted). Where a source
states no acceptance length, AL is fitted on the setup's lowest load and the other loads are scored (the lowest
is then exact by construction and left out of the error median). Writes docs/validation/speculation_load.md.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import yaml

from specplan.costs.moe import verify_expert_reuse
from specplan.core.errors import SpecplanError
from specplan.costs.precision import resolve_precision
from specplan.profiles.registry import load_engine, load_hardware, load_model
from specplan.serving.aggregated import StepOptions, draft_prefill_model, gpu_tables, solve
from specplan.serving.workload import Workload
from specplan.speculation.acceptance import Acceptance
from specplan.speculation.spec import Speculation

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "reference" / "speculation_load"
HOST_GRID_S = np.concatenate([[0.0], np.geomspace(1e-5, 1e-3, 7)])  # spec_host_per_seq_s candidates (s)
# SGLang's step host numbers from the baseline (non-speculative) columns: host_step_s x host_per_seq_s candidates
STEP_GRID_S = np.concatenate([[0.0], np.geomspace(1e-4, 2e-2, 12)])
PER_SEQ_GRID_S = np.concatenate([[0.0], np.geomspace(1e-6, 2e-3, 12)])
REUSE_GRID = (0.0, 0.5, 0.85)  # VERIFY_EXPERT_REUSE candidates (costs/moe.py)
# kernel_overhead_s candidates (s per kernel) where a device's per-kernel time is an assumption: fitted on its
# setups' non-speculative baselines (fit_kernel_overhead), a factor 1.12 apart
KOH_GRID_S = np.geomspace(1e-6, 1e-4, 41)
AL_LO = 1.0001
AL_BISECTION = 16


@dataclass
class Setup:
    """One scored setup: its profile mapping and its rows (load, measured speedup, stated AL or nan)."""

    spec: dict
    loads: np.ndarray
    measured: np.ndarray
    al_rows: np.ndarray
    case_ids: list
    base_value: np.ndarray  # the rows' baseline in their metric: output tokens/s, or mean E2E latency in s (nan: none)

    @property
    def base_tok_s(self) -> np.ndarray:
        """The rows' baseline (non-speculative) output tokens/s where the metric is throughput (else nan)."""
        return self.base_value if self.spec["metric"] == "throughput" else np.full(self.base_value.shape, np.nan)


def load_setups(data: Path = DATA) -> tuple[list[Setup], dict]:
    """The scored setups with their rows, and the not-scored prefixes with reasons."""
    cfg = yaml.safe_load((data / "setups.yaml").read_text())
    with (data / "specdec_sweeps.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    out = []
    for s in cfg["setups"]:
        if s.get("requests") and (s["metric"] != "throughput" or s["load"] == "qps"):
            raise SpecplanError(f"{data / 'setups.yaml'}: setup {s['id']}: requests (a fixed list run in waves) "
                                f"needs metric throughput and a closed loop (load batch or concurrency)")
        mine = sorted((r for r in rows if r["case_id"].startswith(s["rows"])),
                      key=lambda r: float(r["batch_or_concurrency"]))
        al = np.array([float(r["acceptance_length"]) if r["acceptance_length"] else np.nan for r in mine])
        value = np.array([float(r["baseline_value"]) * (1e-3 if r["metric"] == "e2e_latency_ms_mean" else 1.0)
                          if r["baseline_value"] and r["metric"] in ("output_tok_s", "e2e_latency_ms_mean",
                                                                 "e2e_latency_s_mean")
                          else np.nan for r in mine])
        out.append(Setup(s, np.array([float(r["batch_or_concurrency"]) for r in mine]),
                         np.array([float(r["speedup"]) for r in mine]), al, [r["case_id"] for r in mine], value))
    return out, cfg.get("not_scored", {})


def waves(load: float, requests: int) -> list[tuple[int, float]]:
    """(count, size) of the waves in which a harness runs `requests` equal requests, `load` at a time (a thread
    pool or semaphore of `load` over a fixed list): full waves of `load`, then one of the rest."""
    c = float(min(load, requests))
    full = int(requests // c)
    rest = float(requests - full * c)
    return [(full, c)] + ([(1, rest)] if rest > 0 else [])


class Priced:
    """GPU tables of one setup at its loads (baseline once, speculative per MoE verify-reuse value), solved for any
    AL and engine host numbers. A setup that states how many requests its harness runs per level (`requests`)
    is priced over the wave sizes of its loads (waves): the level's tokens/s is all requests' tokens over the sum
    of its waves' request latencies."""

    def __init__(self, st: Setup, hw=None):
        s = st.spec
        self.st = st
        self.m = load_model(s["model"])
        self.hw = hw if hw is not None else load_hardware(s["hardware"])
        eng = load_engine(s["engine"]).for_hardware(self.hw, s["tp"])  # the engine's defaults on this GPU and TP
        if s.get("engine_overrides"):
            eng = eng.model_copy(update=s["engine_overrides"])
        self.eng = eng.for_mechanism(s["mechanism"])  # the engine as it runs this mechanism (spec_sync_mechanisms)
        self.prec = resolve_precision(self.m, self.hw, s.get("dtype"), None)
        d = float(s["draft_len"])
        # the grid: one point per load, or per wave of each load (`owner`: its load, `count`: how many such waves)
        self.in_waves = s.get("requests") is not None
        w = [waves(c, int(s["requests"])) if self.in_waves else [(1, float(c))] for c in st.loads]
        self.owner = np.array([i for i, wi in enumerate(w) for _ in wi])
        self.count = np.array([k for wi in w for k, _ in wi], dtype=float)
        self.levels = levels = np.array([size for wi in w for _, size in wi], dtype=float)
        n = len(levels)  # one table over the loads or wave sizes (closed or open loop)
        self.spec = StepOptions(Speculation.of(
            mechanism=s["mechanism"], draft_len=np.full(n, d), acceptance=Acceptance.from_length(1.5, d),
            draft_model=s.get("draft_model"), draft_dtype=s.get("draft_dtype"),
            tree_tokens=float(s["tree_tokens"]) if s.get("tree_tokens") else None))
        none = StepOptions(Speculation("none", np.zeros(n)))
        dpm = draft_prefill_model(self.m, s["mechanism"], s.get("draft_model"))
        self.draft = None if dpm is None else (dpm, resolve_precision(dpm, self.hw, s.get("draft_dtype") or
                                                                      s.get("dtype"), None))
        load = {"request_rate" if s["load"] == "qps" else "concurrency": levels}
        self.wl = Workload(isl=s["isl"], osl=s["osl"], **load)  # every load at once (an array)
        self.b_max = float(np.max(levels)) if s["load"] != "qps" else 512.0
        self.base = gpu_tables(self.m, self.hw, s["tp"], self.wl, eng, none, self.prec, self.b_max)
        self._spec: dict = {}
        self.moe = self.m.moe is not None

    def spec_tables(self, reuse: float):
        """Speculative GPU tables priced at VERIFY_EXPERT_REUSE = reuse (once per value; dense models ignore it)."""
        key = float(reuse) if self.moe else 0.0
        if key not in self._spec:
            with verify_expert_reuse(key):
                self._spec[key] = gpu_tables(self.m, self.hw, self.st.spec["tp"], self.wl, self.eng, self.spec,
                                             self.prec, self.b_max, self.draft)
        return self._spec[key]

    def baseline_metric(self, upd: dict | None = None) -> np.ndarray:
        """Predicted non-speculative value in the rows' own metric at every load, with engine fields `upd` (host
        numbers): output tokens/s (throughput rows) or mean request latency in s (latency rows)."""
        eng = self.eng.model_copy(update=upd) if upd else self.eng
        return self._metric(solve(self.base, eng, self.wl))

    def _metric(self, r: dict) -> np.ndarray:
        """A solve() result in the rows' metric at every load: output tokens/s, or mean request latency in s."""
        osl = self.wl.osl
        x = np.atleast_1d(r["requests_per_s"]) * np.ones(len(self.levels))
        if self.in_waves:  # all requests' tokens over the sum of the waves' latencies (Little: C / X)
            span = np.bincount(self.owner, weights=self.count * self.levels / x, minlength=len(self.st.loads))
            return float(self.st.spec["requests"]) * osl / span
        v = x * osl if self.st.spec["metric"] == "throughput" else r["ttft_s"] + (osl - 1.0) * r["tpot_s"]
        return np.atleast_1d(v) * np.ones(len(self.st.loads))

    def speedup(self, al, upd: dict, reuse: float = 0.0) -> np.ndarray:
        """Predicted speedup at every load for acceptance length(s) `al`, engine fields `upd`, MoE verify reuse."""
        eng = self.eng.model_copy(update=upd)
        spc = self.spec_tables(reuse)
        a = np.asarray(al, dtype=float)
        a = a[self.owner] if a.ndim else a  # per load -> per grid point (a load's waves share its AL)
        spc = replace(spc, al=a * np.ones(np.shape(spc.al)))
        base, sp = self._metric(solve(self.base, eng, self.wl)), self._metric(solve(spc, eng, self.wl))
        return sp / base if self.st.spec["metric"] == "throughput" else base / sp

    def al_for(self, upd: dict, reuse: float = 0.0) -> np.ndarray:
        """AL per load: the rows' stated AL, or the AL that matches the measured speedup at the lowest load."""
        if self.st.spec["al"] == "row":
            return self.st.al_rows
        lo, hi = AL_LO, 1.0 + float(self.st.spec["draft_len"])
        for _ in range(AL_BISECTION):
            mid = (lo + hi) / 2.0
            if self.speedup(mid, upd, reuse)[0] > self.st.measured[0]:
                hi = mid
            else:
                lo = mid
        return np.full(len(self.st.loads), (lo + hi) / 2.0)

    def predict(self, upd: dict, reuse: float = 0.0) -> np.ndarray:
        """Predicted speedups at the setup's loads with engine fields `upd` and MoE verify reuse `reuse`."""
        return self.speedup(self.al_for(upd, reuse), upd, reuse)


def baseline_time_ratio(p: Priced) -> np.ndarray:
    """The non-speculative time per output token the shipped model prices over the measured one, at every load (the
    rows' baseline columns; nan without them): below 1, the model's baseline is faster than the harness's."""
    pred, meas = p.baseline_metric(), p.st.base_value
    return meas / pred if p.st.spec["metric"] == "throughput" else pred / meas


def scored(st: Setup) -> np.ndarray:
    """Rows that count in the error: all of them, but the AL-fit load when AL was fitted on it."""
    keep = np.ones(len(st.loads), dtype=bool)
    if st.spec["al"] == "fit":
        keep[0] = False
    return keep


def log_err(pred, meas) -> np.ndarray:
    """|log(pred / measured)|."""
    return np.abs(np.log(np.asarray(pred) / np.asarray(meas)))


def sq_err(p: Priced, pred) -> float:
    """Sum of squared log errors over the setup's scored rows."""
    return float(np.sum(log_err(pred, p.st.measured)[scored(p.st)] ** 2))


def fit_step_host(priced: list[Priced]) -> dict:
    """host_step_s and host_per_seq_s minimising the mean squared log error of the baseline tokens/s of the given
    setups (their non-speculative columns), on STEP_GRID_S x PER_SEQ_GRID_S; {} without any."""
    if not priced:
        return {}
    best, best_v = {}, np.inf
    for a in STEP_GRID_S:
        for b in PER_SEQ_GRID_S:
            upd = {"host_step_s": float(a), "host_per_seq_s": float(b)}
            e = np.concatenate([np.log(p.baseline_metric(upd) / p.st.base_tok_s) for p in priced])
            v = float(np.mean(e ** 2))
            if v < best_v:
                best, best_v = upd, v
    return best


def fit_round(others: list[Priced], preds: dict, key) -> tuple[float, dict]:
    """(MoE verify reuse, {engine: spec_host_per_seq_s}) minimising the summed squared log error of `others`:
    per reuse value, each engine's host number on its own setups; then the reuse value with the least total."""
    best = (np.inf, 0.0, {})
    for r in REUSE_GRID:
        tot, hosts = 0.0, {}
        for eng in sorted({p.st.spec["engine"] for p in others}):
            mine = [p for p in others if p.st.spec["engine"] == eng]
            v, h = min((sum(sq_err(p, preds[(id(p), key, r, h)]) for p in mine), h) for h in HOST_GRID_S)
            tot, hosts[eng] = tot + v, float(h)
        if tot < best[0] - 1e-12:
            best = (tot, float(r), hosts)
    return best[1], best[2]


def launch_unmeasured(st: Setup) -> bool:
    """True where setups.yaml marks the setup's device as one without a measured per-kernel time (no kernel table
    of it in reference/measured: `fit_kernel_overhead`) and the setup states its non-speculative baseline in
    absolute terms at every load."""
    return bool(st.spec.get("fit_kernel_overhead")) and bool(np.all(np.isfinite(st.base_value)))


def baseline_sse(st: Setup, grid=KOH_GRID_S) -> np.ndarray:
    """Sum of squared log errors of the setup's non-speculative baseline (its own metric) at every load, for each
    per-kernel time (kernel_overhead_s) in `grid`."""
    hw = load_hardware(st.spec["hardware"])
    return np.array([float(np.sum(np.log(Priced(st, hw.model_copy(update={"kernel_overhead_s": float(v)}))
                                         .baseline_metric() / st.base_value) ** 2)) for v in grid])


def fit_kernel_overhead(setups: list[Setup], grid=KOH_GRID_S) -> dict:
    """Per device whose per-kernel time is an assumption: kernel_overhead_s fitted on the non-speculative baseline
    columns of its setups (least squares on log baseline over `grid`): {"all": {hw: s}, "loo": {setup id: s}} (the
    value fitted on the device's other setups; a setup with none keeps the profile's)."""
    sse = {st.spec["id"]: baseline_sse(st, grid) for st in setups if launch_unmeasured(st)}
    hw_of = {st.spec["id"]: st.spec["hardware"] for st in setups}
    out = {"all": {}, "loo": {}}
    for hw in sorted({hw_of[k] for k in sse}):
        mine = [k for k in sse if hw_of[k] == hw]
        out["all"][hw] = float(grid[int(np.argmin(sum(sse[k] for k in mine)))])
        for k in mine:
            others = [o for o in mine if o != k]
            if others:
                out["loo"][k] = float(grid[int(np.argmin(sum(sse[o] for o in others)))])
    return out


def run(data: Path = DATA, progress=None) -> dict:
    """Price every setup; fit the round numbers with each whole setup left out; return the results."""
    setups, not_scored = load_setups(data)
    koh = fit_kernel_overhead(setups)
    priced = []
    for st in setups:
        if progress:
            progress(f"pricing {st.spec['id']}")
        v = koh["loo"].get(st.spec["id"])
        hw = None if v is None else load_hardware(st.spec["hardware"]).model_copy(update={"kernel_overhead_s": v})
        priced.append(Priced(st, hw))
    base_fit = [p for p in priced if p.st.spec.get("baseline_group")]
    groups = sorted({p.st.spec["baseline_group"] for p in base_fit})
    # step host numbers of engines with baseline columns (SGLang): on all groups, and without each group
    step = {}
    for eng in sorted({p.st.spec["engine"] for p in base_fit}):
        for g in [None] + groups:
            step[(eng, g)] = fit_step_host([p for p in base_fit if p.st.spec["engine"] == eng
                                            and p.st.spec["baseline_group"] != g])

    def step_for(p: Priced, left_out) -> dict:
        return step.get((p.st.spec["engine"], left_out), {})

    preds = {}
    for p in priced:
        if progress:
            progress(f"predicting {p.st.spec['id']}")
        keys = [None] + (groups if (p.st.spec["engine"], None) in step else [])
        for k in keys:
            for r in (REUSE_GRID if p.moe else [0.0]):
                for h in HOST_GRID_S:
                    pr = p.predict({**step_for(p, k), "spec_host_per_seq_s": float(h)}, r)
                    for rr in (REUSE_GRID if not p.moe else [r]):  # dense setups: the same for every reuse value
                        preds[(id(p), k, rr, h)] = pr
        for k in [None] + groups:  # setups whose engine has no baseline fit: same prediction under every key
            for r in REUSE_GRID:
                for h in HOST_GRID_S:
                    preds.setdefault((id(p), k, r, h), preds.get((id(p), None, r, h)))
    results = []
    for p in priced:
        k = p.st.spec.get("baseline_group")
        others = [q for q in priced if q is not p]
        r, hosts = fit_round(others, preds, k)
        fitted = p.st.spec["engine"] in hosts
        h = hosts.get(p.st.spec["engine"], 0.0)
        upd = {**step_for(p, k), "spec_host_per_seq_s": h}
        results.append(dict(setup=p, host_loo=h, reuse_loo=r, step_loo=step_for(p, k), fitted=fitted,
                            pred=preds[(id(p), k, r, h)], pred0=preds[(id(p), k, 0.0, 0.0)], al=p.al_for(upd, r)))
    for res_, p in zip(results, priced):  # what the shipped profiles give (what `predict` prints): nothing fitted
        res_["shipped"] = p.predict({}, 0.0)
        res_["al0"] = p.al_for({}, 0.0)
        res_["base_time_ratio"] = baseline_time_ratio(p)
    r_all, hosts_all = fit_round(priced, preds, None)
    all_fit = {eng: (hosts_all[eng], sum(p.st.spec["engine"] == eng for p in priced), step.get((eng, None), {}))
               for eng in hosts_all}
    return dict(results=results, all_fit=all_fit, reuse_all=r_all, not_scored=not_scored, kernel_overhead=koh)


def summary(res: dict, key: str = "pred") -> dict:
    """Median error (left-one-setup-out with key 'pred'; the shipped profiles with 'shipped'), trends and how many
    setups have their trend within 0.10."""
    errs, trends = [], []
    for r in res["results"]:
        st = r["setup"].st
        k = scored(st)
        errs.append(np.abs(r[key] / st.measured - 1.0)[k])
        tm = st.measured[-1] / st.measured[0]
        tp = r[key][-1] / r[key][0]
        trends.append((st.spec["id"], tm, tp, abs(tp - tm) <= 0.10))
    e = np.concatenate(errs)
    return dict(median_abs_pct=100.0 * float(np.median(e)), mean_abs_pct=100.0 * float(np.mean(e)), n_rows=int(e.size),
                trends=trends, trend_ok=sum(t[3] for t in trends), n_setups=len(trends))


READING = """What is written into the profiles, and why not the rest: none of the fitted values is; fitted with the
setup left out they make the predictions worse than the sourced model (Summary). The SGLang step host numbers
that the baseline columns ask for stand for time these harnesses spend outside the roofline, and the harnesses
disagree: the SpecForge Qwen3-30B-A3B baselines run 1.3-5.3 x slower than the model's (more so at larger
batch), the SpecDrift gpt-oss-120b baselines 1.03-1.25 x (its request list run in waves), so a host number fitted on one misprices the other
(and would make an SGLang Llama-3.1-8B step at batch 64 take tens of milliseconds). The verify expert reuse,
where it is picked, stands in for MoE kernel time the model does not hold, not for measured routing locality
(consecutive-token reuse published for MoE routers is small: Mixtral of Experts, arXiv 2401.04088, Sec. 5).
The round host numbers of vLLM and TensorRT-LLM come from one setup each and cannot be checked with that setup
left out. So engine_profiles/*.yaml keep spec_host_per_seq_s at 0 and costs/moe.py keeps VERIFY_EXPERT_REUSE at
0, and `predict` / `recommend` say in one line that the round's host time is not fitted. The round's sourced
parts (graphs per verify size, draft extend, rejection, tree width, masked tree verify, verify rows in the token
budget, the kernel each engine version verifies MLA with, the launches SGLang's v1 EAGLE round issues outside its
graphs, the full tree mask and the tree draft's per-candidate prefix reads, the verify's sampling passes where
an engine version's code counts them, the row tile of an MoE kernel that picks it from the batch and the
Triton tile rate such a kernel computes at) are in every prediction."""


def _every_row_lines(res: dict) -> list[str]:
    """The report's table of every row: measured and predicted speedups, errors, the baseline time ratio."""
    L = ["", "## Every row", "",
         "Baseline time, model / measured: the non-speculative time per output token the sourced model prices over",
         "the one the row's baseline column measured (below 1: the model's baseline step is faster than the harness's;",
         "a speedup is then predicted on a baseline the harness did not run; '-': the source gives speedups only).", "",
         "| case_id | load | AL | measured | sourced model (scored) | error % | baseline time, model / measured | "
         "fitted, setup left out | error % |",
         "|---|---|---|---|---|---|---|---|---|"]
    for r in res["results"]:
        st = r["setup"].st
        k = scored(st)
        for i, cid in enumerate(st.case_ids):
            err = f"{100 * (r['pred'][i] / st.measured[i] - 1):+.1f}" if k[i] else "(AL fit here)"
            err0 = f"{100 * (r['shipped'][i] / st.measured[i] - 1):+.1f}" if k[i] else "(AL fit here)"
            bt = r["base_time_ratio"][i]
            L.append(f"| {cid} | {st.loads[i]:g} {st.spec['load']} | {r['al0'][i]:.2f} | {st.measured[i]:.3f} | "
                     f"{r['shipped'][i]:.3f} | {err0} | {f'{bt:.2f}' if np.isfinite(bt) else '-'} | "
                     f"{r['pred'][i]:.3f} | {err} |")
    return L


def write_report(out: Path = ROOT / "docs" / "validation" / "speculation_load.md", progress=None) -> Path:
    """Run the validation and write its Markdown report."""
    res = run(progress=progress)
    s = summary(res)
    s0 = summary(res, "shipped")
    L = ["# Speculative speedups under load: predicted vs published sweeps", "",
         "Generated by `specplan validate-speculation` (specplan/validation/speculation_load.py); do not edit by hand.",
         "Data: reference/speculation_load/specdec_sweeps.csv (a copy of the reference data set published/specdec_sweeps.csv, sources in",
         "specdec_sweeps_SOURCES.md beside it); setup mapping and every assumption: reference/speculation_load/setups.yaml.",
         "Prediction: the aggregated serving path (closed loop at C = batch or concurrency, open loop at the request",
         "rate) with each engine's speculative round (specplan/speculation/round.py, docs/speculation_rounds.md).",
         "**Scored: the sourced model**, what `predict` gives with the shipped profiles: no number in it is fitted to",
         "these rows' speedups, so every setup is out of sample. AL: the row's where stated, else fitted on the setup's lowest",
         "load (that row is then exact by construction and not counted). Where a setup ran an engine version whose",
         "round differs from the shipped profile, setups.yaml overrides the profile with the sourced difference.",
         "Where a device has no kernel table in reference/measured (MI300X), its per-kernel time (kernel_overhead_s)",
         "is fitted on the non-speculative baseline columns of its setups, and each setup is scored with the value",
         "fitted on the others (fit_kernel_overhead): no speculative row and no row of the setup itself sets it.",
         "Beside it (not scored): the round's host numbers fitted with each whole setup left out (least squares on",
         "log speedup over the other setups): each engine's `spec_host_per_seq_s`, one `VERIFY_EXPERT_REUSE`",
         "(specplan/costs/moe.py) for all MoE setups, and SGLang's step host numbers (host_step_s, host_per_seq_s)",
         "from the baseline (non-speculative) tokens/s columns of the H100 SGLang setups, the setup's own left out.", "",
         "## Summary", "",
         f"- **sourced model** (scored; nothing fitted to a speculative row): median |error| of the speedup **{s0['median_abs_pct']:.1f} %** "
         f"over {s0['n_rows']} scored rows (mean {s0['mean_abs_pct']:.1f} %); trend (speedup at the highest load / at "
         f"the lowest) within 0.10 of the measured one in **{s0['trend_ok']} of {s0['n_setups']}** setups",
         f"- with the round's host numbers fitted, one setup left out at a time: median |error| "
         f"{s['median_abs_pct']:.1f} % (mean {s['mean_abs_pct']:.1f} %), trends within 0.10 in {s['trend_ok']} of "
         f"{s['n_setups']}", ""]
    koh = res.get("kernel_overhead", {"all": {}, "loo": {}})
    for hw_id, v in koh["all"].items():
        prof = load_hardware(hw_id).kernel_overhead_s
        loo = ", ".join(f"{k} {x * 1e6:.1f} us" for k, x in koh["loo"].items())
        L += [f"- {hw_id} kernel_overhead_s fitted on its setups' non-speculative baselines: {v * 1e6:.1f} us per "
              f"kernel (hardware_profiles/{hw_id}.yaml holds {prof * 1e6:.1f} us); each setup scored with the value "
              f"from the other: {loo}", ""]
    top = (res["reuse_all"] >= max(REUSE_GRID), {e: v[0] >= HOST_GRID_S[-1] for e, v in res["all_fit"].items()})
    L += [f"Fitted on all setups together: VERIFY_EXPERT_REUSE {res['reuse_all']:.2f}"
          f"{' (the top of its grid)' if top[0] else ''};", ""]
    for eng, (h, n, stp) in res["all_fit"].items():
        extra = (f"; step host from the baseline columns: host_step_s {stp['host_step_s'] * 1e3:.3f} ms, "
                 f"host_per_seq_s {stp['host_per_seq_s'] * 1e6:.1f} us" if stp else "")
        L.append(f"- {eng}: spec_host_per_seq_s {h * 1e6:.1f} us per sequence per round ({n} setup"
                 f"{'s, left out in turn above' if n != 1 else ', in-sample only'}){extra}")
    L += ["", READING]
    L += ["", "## Trends", "", "| setup | engine | loads | measured trend | sourced model (scored) | within 0.10 | "
          "fitted, setup left out | round host us/seq (LOO) | MoE verify reuse (LOO) |",
          "|---|---|---|---|---|---|---|---|---|"]
    for r, t, t0 in zip(res["results"], s["trends"], s0["trends"]):
        st = r["setup"].st
        h = f"{r['host_loo'] * 1e6:.1f}" if r["fitted"] else "0 (unfitted)"
        L.append(f"| {t[0]} | {st.spec['engine']} | {', '.join(f'{x:g}' for x in st.loads)} | {t[1]:.3f} | "
                 f"{t0[2]:.3f} | {'yes' if t0[3] else 'no'} | {t[2]:.3f} | {h} | "
                 f"{r['reuse_loo'] if r['setup'].moe else '-'} |")
    L += _every_row_lines(res)
    L += ["", "## Misses explained", ""]
    for r, t in zip(res["results"], s0["trends"]):
        sp = r["setup"].st.spec
        if sp.get("miss"):
            L.append(f"- **{sp['id']}** (trend {'within' if t[3] else 'off by more than'} 0.10): {sp['miss']}")
    L += ["", "## Assumptions per setup", ""]
    for r in res["results"]:
        sp = r["setup"].st.spec
        L.append(f"- **{sp['id']}** ({sp['model']}, {sp['hardware']} TP {sp['tp']}, {sp['engine']}, {sp['mechanism']} "
                 f"D {sp['draft_len']}{', tree ' + str(sp['tree_tokens']) if sp.get('tree_tokens') else ''}): "
                 f"{sp['assumptions']}")
    L += ["", "## Not scored", ""]
    for k, v in res["not_scored"].items():
        L.append(f"- `{k}`: {v}")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(L) + "\n")
    return out
