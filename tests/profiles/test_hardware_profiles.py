"""Built-in hardware profiles: they load, every number has a source, and the spec-sheet numbers match
reference/hardware_specs.csv (the project's copy of the sourced reference table)."""

from __future__ import annotations

import csv
import gzip
import re
import statistics
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
import yaml

from specplan.core.errors import SpecplanError
from specplan.profiles.hardware import HardwareProfile
from specplan.profiles.registry import hardware_dir, hardware_ids, load_hardware

REPO = Path(__file__).resolve().parents[2]
SPECS_CSV = REPO / "reference" / "hardware_specs.csv"
ALLREDUCE_CSV = REPO / "reference" / "measured" / "allreduce_h100_a100.csv.gz"

# Built-in id -> row id in reference/hardware_specs.csv (None: no row, e.g. the CPU example).
CSV_ROW = {
    "h100-sxm": "h100_sxm",
    "h200-sxm": "h200_sxm",
    "b200": "b200_hgx",
    "gb200": "gb200_nvl72",
    "a100-sxm-80gb": "a100_sxm_80gb",
    "mi300x": "mi300x",
    "b300": "b300_hgx",
    "gb300": "gb300_nvl72",
    "mi325x": "mi325x",
    "mi355x": "mi355x",
    "groq-lpu": "groq_lpu_v1",
    "groq-3-lpu": "groq3_lpu_lp30",
    "cpu-generic": None,
}
BUILTIN_IDS = sorted(CSV_ROW)

# Compute dtype -> csv column (TFLOPS or TOPS, dense). fp6 has a column but no specplan dtype.
DTYPE_COLUMN = {
    "fp32": "fp32_tflops",
    "tf32": "tf32_tflops_dense",
    "bf16": "bf16_tflops_dense",
    "fp16": "fp16_tflops_dense",
    "fp8": "fp8_tflops_dense",
    "fp4": "fp4_tflops_dense",
    "int8": "int8_tops_dense",
}

# Top-level fields that hold numbers (directly or in a nested block): each one set in a YAML needs a source.
NUMERIC_FIELDS = {
    "peak_flops",
    "mem_capacity_bytes",
    "mem_bandwidth_bytes_s",
    "l2_bytes",
    "scaleup_bandwidth_bytes_s",
    "scaleup_latency_s",
    "scaleup_domain",
    "kernel_overhead_s",
    "chip_hop_latency_s",
    "efficiency",
    "attention",
    "allreduce",
    "calibration",
}
# Sourced in every profile, set or left at the schema default (the defaults are numbers too).
ALWAYS_SOURCED = {
    "peak_flops",
    "mem_capacity_bytes",
    "mem_bandwidth_bytes_s",
    "kernel_overhead_s",
    "efficiency",
    "attention",
    "allreduce",
}

_NUM = re.compile(r"^[~≈]?\s*([0-9][0-9,]*(?:\.[0-9]+)?)")


def leading_number(cell: str) -> float | None:
    """The leading number of a csv cell ("180 (HGX ...)" -> 180, "~1230 per chip" -> 1230), else None."""
    m = _NUM.match((cell or "").strip())
    return float(m.group(1).replace(",", "")) if m else None


@pytest.fixture(scope="module")
def specs() -> dict[str, dict[str, str]]:
    with SPECS_CSV.open(newline="") as f:
        return {row["id"]: row for row in csv.DictReader(f)}


def raw_yaml(hw_id: str) -> dict:
    return yaml.safe_load((hardware_dir() / f"{hw_id}.yaml").read_text())


def close(a: float, b: float, rel: float = 0.01) -> bool:
    return abs(a - b) <= rel * abs(b)


# ---------------------------------------------------------------- helpers


def test_leading_number_parses_the_csv_cells():
    assert leading_number("180 (HGX datasheet 1.44 TB/8; 192 GB HBM3e physical)") == 180
    assert leading_number("7700 (HGX per-GPU) / 8000 (marketing)") == 7700
    assert leading_number("~1230 per chip (315 PF / 256; ~1.2 PF reported)") == 1230
    assert leading_number("163.4 (vector & matrix)") == 163.4
    assert leading_number("n/a (no FP8)") is None
    assert leading_number("not found") is None
    assert leading_number("") is None


# ---------------------------------------------------------------- loading and sources


def test_every_builtin_id_is_listed():
    assert set(BUILTIN_IDS) <= set(hardware_ids())


@pytest.mark.parametrize("hw_id", BUILTIN_IDS)
def test_builtin_loads_and_id_matches_file(hw_id):
    hw = load_hardware(hw_id)
    assert isinstance(hw, HardwareProfile)
    assert hw.id == hw_id
    assert hw.name and hw.vendor


@pytest.mark.parametrize("hw_id", BUILTIN_IDS)
def test_every_numeric_field_set_has_a_source(hw_id):
    raw = raw_yaml(hw_id)
    sources = raw.get("sources") or {}
    set_numeric = NUMERIC_FIELDS & set(raw)
    required = set_numeric | ALWAYS_SOURCED
    if raw.get("kind") == "lpu":
        required.add("chip_hop_latency_s")
    if int(raw.get("scaleup_domain", 1)) > 1:
        required |= {"scaleup_bandwidth_bytes_s", "scaleup_latency_s", "scaleup_domain"}
    missing = sorted(f for f in required if not str(sources.get(f, "")).strip())
    assert not missing, f"{hw_id}: numeric fields without a source: {missing}"


@pytest.mark.parametrize("hw_id", BUILTIN_IDS)
def test_sources_name_real_fields_and_say_where_from(hw_id):
    sources = raw_yaml(hw_id)["sources"]
    unknown = sorted(set(sources) - set(HardwareProfile.model_fields))
    assert not unknown, f"{hw_id}: sources for fields that do not exist: {unknown}"
    for field, text in sources.items():
        # Either a cited reference file or a named assumption with its reason.
        cited = "reference/" in text or "docs/validation" in text
        assumed = text.startswith("assumption:") and "because" in text
        assert cited or assumed, f"{hw_id}: sources.{field} neither cites a reference nor names an assumption"


ACHIEVABLE = {"achievable_mem_bw_fraction": "mem_bw_fraction", "achievable_gemm_fraction": "compute_max_fraction"}


@pytest.mark.parametrize("hw_id", [i for i in BUILTIN_IDS if CSV_ROW[i]])
def test_efficiency_citing_csv_achievable_fractions_uses_them(hw_id, specs):
    """A source that cites the csv row's achievable fractions must use them (not another device's fit)."""
    text = raw_yaml(hw_id)["sources"]["efficiency"]
    row = specs[CSV_ROW[hw_id]]
    hw = load_hardware(hw_id)
    for col, field in ACHIEVABLE.items():
        want = leading_number(row[col])
        if want is None:
            continue
        quoted = "hardware_specs.csv" in text and re.search(rf"(?<![0-9.]){re.escape(f'{want:g}')}(?![0-9])", text)
        if col not in text and not quoted:
            continue
        for dtype, eff in hw.efficiency.items():
            assert getattr(eff, field) == pytest.approx(want), f"{hw_id} efficiency.{dtype}.{field} vs csv {col}"


ALLREDUCE_LATENCIES = ("custom_latency_s", "nccl_latency_s", "nccl_latency_per_peer_s")


@pytest.mark.parametrize("hw_id", BUILTIN_IDS)
def test_allreduce_numbers_are_set_and_sourced(hw_id):
    """A multi-GPU profile sets its all-reduce latencies (no bare schema defaults); no source calls a number it
    sets a schema default; a profile that borrows h100-sxm's floors carries exactly h100-sxm's values."""
    raw = raw_yaml(hw_id)
    block = raw.get("allreduce") or {}
    text = raw["sources"]["allreduce"]
    if raw["kind"] == "gpu" and int(raw.get("scaleup_domain", 1)) > 1:
        assert set(ALLREDUCE_LATENCIES) <= set(block), f"{hw_id}: all-reduce latencies left at schema defaults"
        assert "latenc" in text or all(k in text for k in ALLREDUCE_LATENCIES)
    for clause in text.split(";"):
        if "schema default" in clause:
            named = [k for k in block if k in clause] + (["latencies"] if "latencies" in clause and
                                                         set(ALLREDUCE_LATENCIES) & set(block) else [])
            assert not named, f"{hw_id}: sources.allreduce calls {named} schema defaults but the profile sets them"
    if "h100-sxm's measured" in text:
        ref = load_hardware("h100-sxm").allreduce
        got = load_hardware(hw_id).allreduce
        for k in ALLREDUCE_LATENCIES:
            assert getattr(got, k) == getattr(ref, k), f"{hw_id}: allreduce.{k} is not h100-sxm's"


_US = re.compile(r"([0-9]+(?:\.[0-9]+)?) us")


@pytest.mark.parametrize("hw_id", BUILTIN_IDS)
def test_kernel_overhead_source_states_the_value_used(hw_id):
    """The source states the number the profile uses (or that it is fitted); 'as h100-sxm' must be h100-sxm's value."""
    hw = load_hardware(hw_id)
    text = hw.sources["kernel_overhead_s"]
    if "fitted by" not in text:
        if hw.kernel_overhead_s == 0:
            assert text.startswith("assumption: 0"), hw_id
        else:
            m = _US.search(text)
            assert m and float(m.group(1)) == pytest.approx(hw.kernel_overhead_s * 1e6), (hw_id, text[:80])
    if "h100-sxm's fitted" in text or "as h100-sxm" in text:
        assert hw.kernel_overhead_s == load_hardware("h100-sxm").kernel_overhead_s


# ---------------------------------------------------------------- spec-sheet numbers against the csv


@pytest.mark.parametrize("hw_id", [i for i in BUILTIN_IDS if CSV_ROW[i]])
def test_peaks_match_reference_csv(hw_id, specs):
    hw = load_hardware(hw_id)
    row = specs[CSV_ROW[hw_id]]
    csv_peaks = {d: leading_number(row[col]) for d, col in DTYPE_COLUMN.items()}
    csv_peaks = {d: v * 1e12 for d, v in csv_peaks.items() if v}
    # Exactly the dtypes the csv gives a number for, each within 1%.
    assert set(hw.peak_flops) == set(csv_peaks), f"{hw_id}: dtypes {sorted(hw.peak_flops)} vs csv {sorted(csv_peaks)}"
    for dtype, want in csv_peaks.items():
        assert close(hw.peak(dtype), want), f"{hw_id} {dtype}: {hw.peak(dtype):.4g} vs csv {want:.4g}"


@pytest.mark.parametrize("hw_id", [i for i in BUILTIN_IDS if CSV_ROW[i]])
def test_memory_matches_reference_csv(hw_id, specs):
    hw = load_hardware(hw_id)
    row = specs[CSV_ROW[hw_id]]
    if hw.kind == "lpu":  # weights live in on-chip SRAM: capacity is the SRAM per chip
        cap = leading_number(row["on_chip_sram_mb"]) * 1e6
    elif hw.kind == "gpu":  # HBM datasheet "GB" are GiB (power-of-two stacks); readings may be up to 1% below
        cap = leading_number(row["mem_capacity_gb"]) * 2**30
        smi = re.search(r"([0-9]+) MiB nvidia-smi", row["mem_capacity_gb"])
        if smi and "nvidia-smi" in hw.sources["mem_capacity_bytes"]:  # the usable reading, where the source takes it
            cap = float(smi.group(1)) * 2**20
    else:
        cap = leading_number(row["mem_capacity_gb"]) * 1e9
    assert close(hw.mem_capacity_bytes, cap)
    assert close(hw.mem_bandwidth_bytes_s, leading_number(row["mem_bw_gbps"]) * 1e9)
    l2 = leading_number(row["l2_cache_mb"])
    if "measured" in hw.sources.get("l2_bytes", "") or "bench_data/" in hw.sources.get("l2_bytes", ""):
        import json

        measured = json.loads((REPO / "bench_data" / "h200_env.json").read_text())["info"]["l2_bytes"]
        assert hw.l2_bytes == measured  # our own reading overrides the spec sheet
    elif l2 is not None:
        assert close(hw.l2_bytes, l2 * 1e6)


@pytest.mark.parametrize("hw_id", [i for i in BUILTIN_IDS if CSV_ROW[i]])
def test_scaleup_bandwidth_is_per_direction(hw_id, specs):
    cell = specs[CSV_ROW[hw_id]]["scaleup_bw_per_device_gbps"]
    if "bidir" not in cell:
        pytest.skip(f"{hw_id}: reference/hardware_specs.csv gives its scale-up bandwidth as {cell!r}, not as a "
                    f"bidirectional total, so there is no total to halve into the per-direction figure")
    hw = load_hardware(hw_id)
    assert close(hw.scaleup_bandwidth_bytes_s, leading_number(cell) * 1e9 / 2)


def test_no_sparse_headlines():
    # The sparse headlines (2x) must never appear: H100 bf16 1979, B200 fp4 18 PF, MI300X fp8 5230.
    assert close(load_hardware("h100-sxm").peak("bf16"), 989.4e12)
    assert close(load_hardware("b200").peak("fp4"), 9.0e15)
    assert close(load_hardware("mi300x").peak("fp8"), 2614.9e12)


def test_h100_ridge_point():
    hw = load_hardware("h100-sxm")
    assert hw.ridge_flops_per_byte("bf16") == pytest.approx(989.4e12 / 3.35e12, rel=1e-9)
    assert hw.ridge_flops_per_byte("bf16") == pytest.approx(295.3, abs=0.05)
    e = hw.kernel_eff("bf16")
    want = 989.4e12 * e.compute_max_fraction / (3.35e12 * e.mem_bw_fraction)
    assert hw.ridge_flops_per_byte("bf16", effective=True) == pytest.approx(want, rel=1e-9)


# ---------------------------------------------------------------- dtypes each device computes in


@pytest.mark.parametrize(
    "hw_id, dtype",
    [
        ("a100-sxm-80gb", "fp8"),
        ("a100-sxm-80gb", "fp4"),
        ("h100-sxm", "fp4"),
        ("h200-sxm", "fp4"),
        ("mi300x", "fp4"),
        ("mi325x", "fp4"),
        ("mi355x", "fp32"),
        ("groq-lpu", "bf16"),
        ("groq-lpu", "fp8"),
        ("groq-3-lpu", "bf16"),
        ("groq-3-lpu", "fp4"),
        ("cpu-generic", "fp8"),
    ],
)
def test_unsupported_dtype_is_an_error(hw_id, dtype):
    hw = load_hardware(hw_id)
    with pytest.raises(SpecplanError, match=rf"{hw_id}: cannot compute in {dtype}"):
        hw.peak(dtype)


def test_dtype_sets_per_device():
    assert set(load_hardware("mi300x").peak_flops) == {"fp32", "tf32", "bf16", "fp16", "fp8", "int8"}
    assert set(load_hardware("groq-lpu").peak_flops) == {"fp16", "int8"}
    assert set(load_hardware("groq-3-lpu").peak_flops) == {"fp8"}
    for hw_id in ("b200", "gb200", "b300", "gb300", "mi355x"):
        assert "fp4" in load_hardware(hw_id).peak_flops
    assert "fp8" not in load_hardware("a100-sxm-80gb").peak_flops
    # Aliases resolve to the canonical names.
    assert load_hardware("h100-sxm").peak("bfloat16") == load_hardware("h100-sxm").peak("bf16")


# ---------------------------------------------------------------- LPU and CPU specifics


@pytest.mark.parametrize("hw_id", ["groq-lpu", "groq-3-lpu"])
def test_lpu_is_statically_scheduled_with_a_named_hop_latency(hw_id):
    hw = load_hardware(hw_id)
    assert hw.kind == "lpu"
    assert hw.kernel_overhead_s == 0.0
    assert 0.1e-6 <= hw.chip_hop_latency_s <= 10e-6
    src = raw_yaml(hw_id)["sources"]
    assert src["chip_hop_latency_s"].startswith("assumption:")
    assert "statically scheduled" in src["kernel_overhead_s"]
    assert hw.mem_capacity_bytes < 1e9  # SRAM per chip, not a rack


def test_cpu_example_follows_the_documented_formulas():
    hw = load_hardware("cpu-generic")
    assert hw.kind == "cpu"
    cores, clock = 32, 3.0e9
    assert hw.peak("fp32") == pytest.approx(cores * clock * 64)  # 2 FMA units x 16 lanes x 2 FLOP
    assert hw.mem_bandwidth_bytes_s == pytest.approx(8 * 4800e6 * 8)  # channels x MT/s x 8 B


# ---------------------------------------------------------------- all-reduce latencies from the measured table


def _allreduce_floors() -> dict[tuple[str, str, str, int], float]:
    """(device, 'custom'|'nccl', framework, gpus) -> fastest time (s) at messages <= 8 KB, graph-mode kernels."""
    bytes_per = {"half": 2, "bfloat16": 2, "int8": 1}
    times: dict[tuple, list[float]] = defaultdict(list)
    with gzip.open(ALLREDUCE_CSV, "rt", newline="") as f:
        for r in csv.DictReader(f):
            if r["dtype"] == "int8" or "eager" in r["kernel"]:
                continue
            if int(r["message_elems"]) * bytes_per[r["dtype"]] > 8192:
                continue
            algo = "nccl" if r["kernel"] == "NCCL" else "custom"
            times[(r["device"], algo, r["framework"], int(r["num_gpus"]))].append(float(r["time_us"]) * 1e-6)
    return {k: min(v) for k, v in times.items()}


@pytest.mark.parametrize("hw_id", ["h100-sxm", "a100-sxm-80gb"])
def test_allreduce_latencies_match_measured_floors(hw_id):
    hw = load_hardware(hw_id)
    floors = _allreduce_floors()
    p = hw.allreduce
    # NCCL: base + per peer x (GPUs - 1) reproduces the floor of every NCCL version within 10%.
    nccl = {k: v for k, v in floors.items() if k[0] == hw_id and k[1] == "nccl"}
    assert nccl
    for (_, _, _, n), t in nccl.items():
        model = p.nccl_latency_s + p.nccl_latency_per_peer_s * (n - 1)
        assert model == pytest.approx(t, rel=0.10), f"{hw_id} NCCL at {n} GPUs"
    # Custom one-shot: the median floor of the newest version of each engine, within 5%.
    custom = {k: v for k, v in floors.items() if k[0] == hw_id and k[1] == "custom"}
    newest: dict[str, tuple[tuple[int, ...], str]] = {}
    for _, _, fw, _ in custom:
        engine, version = fw.split(" ", 1)
        key = tuple(int(x) for x in re.findall(r"\d+", version))  # 1.3.0rc20 -> (1, 3, 0, 20)
        if engine not in newest or key > newest[engine][0]:
            newest[engine] = (key, fw)
    picked = [t for (_, _, fw, _), t in custom.items() if fw in {f for _, f in newest.values()}]
    assert len(picked) == 9  # 3 engines x 2/4/8 GPUs
    assert p.custom_latency_s == pytest.approx(statistics.median(picked), rel=0.05)
    assert min(picked) <= p.custom_latency_s <= max(picked)


def test_allreduce_nccl_line_is_a_least_squares_fit_h100():
    # through the floors of the fit rows only (NCCL 2.29.2); NCCL 2.27.3 is held out by the validation report
    floors = _allreduce_floors()
    pts = [(n - 1, t) for (d, a, fw, n), t in floors.items() if d == "h100-sxm" and a == "nccl" and fw == "nccl 2.29.2"]
    assert len(pts) == 3
    x, y = np.array(pts).T
    slope, base = np.polyfit(x, y, 1)
    p = load_hardware("h100-sxm").allreduce
    assert p.nccl_latency_s == pytest.approx(base, rel=0.02)
    assert p.nccl_latency_per_peer_s == pytest.approx(slope, rel=0.02)


# ---------------------------------------------------------------- bad input: one line naming file and field


def _write(tmp_path: Path, text: str, name: str = "bad.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def _good_text() -> str:
    return (hardware_dir() / "h100-sxm.yaml").read_text()


def _load_error(p: Path) -> str:
    """The SpecplanError message of loading the hardware profile at `p` (fails the test when it loads)."""
    with pytest.raises(SpecplanError) as exc:
        load_hardware(str(p))
    return str(exc.value)


def test_malformed_yaml_names_the_file(tmp_path):
    p = _write(tmp_path, "id: x\npeak_flops: {bf16: 1e12\nmem_capacity_bytes: [\n")
    msg = _load_error(p)
    assert str(p) in msg and "malformed YAML" in msg
    assert "\n" not in msg


def test_unknown_field_names_the_file_and_field(tmp_path):
    p = _write(tmp_path, _good_text() + "mem_bandwith_bytes_s: 3.0e+12\n")
    msg = _load_error(p)
    assert str(p) in msg and "mem_bandwith_bytes_s" in msg
    assert "\n" not in msg


def test_negative_bandwidth_names_the_file_and_field(tmp_path):
    text = _good_text().replace("mem_bandwidth_bytes_s: 3.35e12", "mem_bandwidth_bytes_s: -3.35e+12")
    assert "-3.35e+12" in text
    p = _write(tmp_path, text)
    msg = _load_error(p)
    assert str(p) in msg and "mem_bandwidth_bytes_s" in msg and "greater than" in msg
    assert "\n" not in msg


def test_negative_peak_names_the_file_and_dtype(tmp_path):
    text = _good_text().replace("  fp8: 1978.9e12", "  fp8: -1.0")
    p = _write(tmp_path, text)
    msg = _load_error(p)
    assert str(p) in msg and "peak_flops" in msg and "fp8" in msg


def test_unknown_dtype_in_peaks_names_the_file(tmp_path):
    text = _good_text().replace("  fp8: 1978.9e12", "  fp9: 1978.9e12")
    p = _write(tmp_path, text)
    msg = _load_error(p)
    assert str(p) in msg and "fp9" in msg


def test_unknown_id_suggests_the_closest():
    with pytest.raises(SpecplanError, match="did you mean 'h100-sxm'"):
        load_hardware("h100-sx")


# ---------------------------------------------------------------- fp4 as each device deploys it (issue 38)


@pytest.mark.parametrize("hw_id, fmt, scale_bytes", [("b200", "fp4", 1 / 16), ("gb200", "fp4", 1 / 16),
                                                    ("b300", "fp4", 1 / 16), ("gb300", "fp4", 1 / 16),
                                                    ("mi355x", "mxfp4", 1 / 32)])
def test_dtype_fp4_prices_the_deployed_4bit_format(hw_id, fmt, scale_bytes):
    """--dtype fp4 means NVFP4 weights on Blackwell (one fp8 scale per 16 elements) and MXFP4 on CDNA4 (one E8M0
    scale per 32): weight bytes 0.5 + 1/16 or 0.5 + 1/32 per element, math on the fp4 peak either way."""
    from specplan.core.dtypes import dtype_bytes
    from specplan.costs.precision import resolve_precision
    from specplan.profiles.registry import load_model

    hw = load_hardware(hw_id)
    prec = resolve_precision(load_model("llama-3.1-8b"), hw, dtype="fp4")
    assert hw.fp4_format == fmt
    assert prec.w("ffn") == fmt and prec.w("attention") == fmt
    assert dtype_bytes(prec.w("ffn")) == pytest.approx(0.5 + scale_bytes)
    assert hw.peak(prec.w("ffn")) == hw.peak_flops["fp4"]
    # an explicit weight format still wins
    assert resolve_precision(load_model("llama-3.1-8b"), hw, dtype="fp4", weight_dtype="fp4").w("ffn") == "fp4"


@pytest.mark.parametrize("hw_id, relative", [("b300", "b200"), ("gb300", "gb200"), ("mi325x", "mi300x"),
                                             ("mi355x", "mi300x")])
def test_new_profiles_carry_their_nearest_relatives_efficiencies_and_say_so(hw_id, relative):
    """No measurement of these devices is used: their GEMM, attention and all-reduce efficiencies are the nearest
    measured relative's, and the efficiency source names it."""
    hw, rel = load_hardware(hw_id), load_hardware(relative)
    assert relative in hw.sources["efficiency"] and "nearest measured relative" in hw.sources["efficiency"]
    for d in ("default", "bf16", "fp8"):
        assert hw.kernel_eff(d) == rel.kernel_eff(d)
    assert hw.attention == rel.attention
    assert hw.allreduce == rel.allreduce
