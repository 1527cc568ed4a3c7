"""Input files and invocations for the fuzz suite: one regression case per example of issue 13, and seeds
(valid profiles, studies, configs and measured tables) that the strategies mutate.

`example_cases(tmp)` writes the files it needs under `tmp` and returns the cases; each case says which exit
code is expected and a piece of text the one error line (or stdout) must contain.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HW = ROOT / "hardware_profiles"
MODELS = ROOT / "model_profiles"
HF = ROOT / "reference" / "hf_configs"
MEAS = ROOT / "reference" / "measured"

FAST = ["--model", "llama-3.2-1b", "--hardware", "h100-sxm"]  # a small model: every command runs in < 1 s
PARETO_SMALL = ["--batch-max", "4", "--max-draft-len", "2", "--tp", "1", "--mechanisms", "eagle3",
                "--acceptance", "eagle3=0.7", "--no-plots", "--no-progress"]


@dataclass
class Case:
    """One invocation: expected exit code and a substring of the error line (rc 2) or of stdout (rc 0)."""

    name: str
    argv: list
    rc: int = 2
    needle: str = ""
    outdir: Path | None = None  # a folder whose files the judge checks
    extra: dict = field(default_factory=dict)


def h100_text() -> str:
    return (HW / "h100-sxm.yaml").read_text()


def gemm_rows(n: int = 40) -> str:
    """A small valid GEMM table (H100 TRT-LLM rows of the shipped measured table) as CSV text."""
    import pandas as pd

    g = pd.read_csv(MEAS / "gemm_h100_a100.csv.gz")
    g = g[(g["device"] == "h100-sxm") & (g["dtype"] == "bf16")]
    g = g.iloc[:: max(1, len(g) // n)].head(n)
    return g.drop(columns=["source"]).to_csv(index=False)


def small_study(extra: str = "") -> str:
    return ("name: tiny\n"
            "base:\n  model: llama-3.2-1b\n  hardware: h100-sxm\n  batch: [1, 4]\n  max_draft_len: 2\n"
            "  tp: [1]\n  context: [1024]\n  mechanisms: {eagle3: 0.7}\n"
            "variants:\n  - name: fast\n    hardware: {mem_bandwidth_bytes_s: {scale: 2}}\n"
            "plots: []\n" + extra)


def alias_bomb(levels: int = 12, width: int = 9) -> str:
    """The 'billion laughs' YAML: each level lists the previous one `width` times (width^levels values)."""
    lines = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]")
    return "\n".join(lines) + f"\nid: *a{levels - 1}\n"


def write(tmp: Path, name: str, data) -> Path:
    p = tmp / name
    p.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        p.write_bytes(data)
    else:
        p.write_text(data)
    return p


def example_cases(tmp: Path) -> list[Case]:
    """Every example bullet of issue 13 as an invocation (files written under `tmp`)."""
    tmp.mkdir(parents=True, exist_ok=True)
    h100 = h100_text()
    llama = json.loads((HF / "meta-llama--Meta-Llama-3.1-8B_config.json").read_text())
    mixtral = json.loads((HF / "mistralai--Mixtral-8x7B-v0.1_config.json").read_text())
    gemm = gemm_rows()
    afile = write(tmp, "a_file.txt", "not a folder\n")
    c: list[Case] = []
    add = c.append

    # --- tracebacks
    add(Case("binary_profile", ["step", "--model", "llama-3.2-1b", "--hardware",
                                write(tmp, "binary.yaml", b"\x89PNG\r\n\x1a\n\x00\xff\xfe" * 20),
                                "--batch", "1", "--context", "128"], 2, "not UTF-8"))
    add(Case("latin1_profile", ["step", "--model", "llama-3.2-1b", "--hardware",
                                write(tmp, "latin1.yaml", h100.replace("NVIDIA H100", "NVIDIA H100 \u00e9t\u00e9")
                                      .encode("latin-1", "replace")), "--batch", "1", "--context", "128"],
              2, "not UTF-8"))
    inf_cfg = dict(llama, num_hidden_layers="__INF__")
    add(Case("hf_infinity_int", ["model", "import", write(tmp, "inf_config.json", json.dumps(inf_cfg).replace(
        '"__INF__"', "Infinity"))], 2, "num_hidden_layers: must be a finite number"))
    add(Case("hf_1e400_int", ["model", "import", write(tmp, "big_config.json", json.dumps(inf_cfg).replace(
        '"__INF__"', "1e400"))], 2, "num_hidden_layers: must be a finite number"))
    add(Case("hf_400_digit_int", ["model", "import", write(tmp, "digits_config.json", json.dumps(inf_cfg).replace(
        '"__INF__"', "9" * 400))], 2, "num_hidden_layers: integer out of range"))
    tsl = dict(llama, time_step_limit="__TSL__")  # issue 22: an unread field of a foreign config is carried
    add(Case("hf_unread_infinity_imports", ["model", "import", write(tmp, "tsl_config.json", json.dumps(tsl).replace(
        '"__TSL__"', "[0.0, Infinity]"))], 0, "parameters: total 8,030,261,248"))
    add(Case("id_longer_than_255", ["step", "--model", "x" * 300, "--hardware", "h100-sxm", "--batch", "1",
                                    "--context", "128"], 2, "at most 255 characters"))
    add(Case("profile_id_longer_than_255", ["step", "--model", "llama-3.2-1b", "--hardware",
                                            write(tmp, "longid.yaml", h100.replace("id: h100-sxm", "id: " + "h" * 300)),
                                            "--batch", "1", "--context", "128"], 2, "id: String should have at most 255"))
    add(Case("out_is_existing_file_pareto", ["pareto", *FAST, *PARETO_SMALL, "-o", afile], 2, "is an existing file, not a folder"))
    add(Case("out_is_existing_file_study", ["study", write(tmp, "study_ok.yaml", small_study()), "-o", afile],
             2, "is an existing file, not a folder"))
    add(Case("out_under_a_file_import", ["model", "import", HF / "meta-llama--Llama-3.2-1B-Instruct_config.json",
                                         "-o", afile / "x.yaml"], 2, "is a file"))
    add(Case("out_under_a_file_pareto", ["pareto", *FAST, *PARETO_SMALL, "-o", afile / "sub"], 2, "is a file"))
    dup_out = tmp / "dup_hw"
    add(Case("hardware_twice_pareto", ["pareto", "--model", "llama-3.2-1b", "--hardware", "h100-sxm", "--hardware",
                                       "h100-sxm", *PARETO_SMALL, "-o", dup_out], 0, "grid points", outdir=dup_out))
    add(Case("batch_points_negative", ["pareto", *FAST, "--batch-points", "-1", "--no-plots", "-o",
                                       tmp / "bp"], 2, "batch_points: must be >= 2"))
    add(Case("mechanisms_none", ["recommend", *FAST, "--context", "1024", "--mechanisms", "none"], 2,
             "mechanisms: give at least one draft mechanism"))
    blank = gemm.splitlines()
    blank[3] = ",".join("" if i == 5 else x for i, x in enumerate(blank[3].split(",")))
    blank_csv = write(tmp, "blank_cell.csv", "\n".join(blank) + "\n")
    add(Case("blank_cell_validate", ["validate", blank_csv, "--hardware", "h100-sxm"], 2,
             "column 'time_us', data row 3 (line 4): blank"))
    add(Case("blank_cell_calibrate", ["calibrate", blank_csv, "--hardware", "h100-sxm", "-o", tmp / "cal.yaml"], 2,
             "column 'time_us', data row 3 (line 4): blank"))
    nocol = "\n".join(",".join(x for i, x in enumerate(ln.split(",")) if i != 3) for ln in gemm.splitlines())
    nocol_csv = write(tmp, "missing_column.csv", nocol + "\n")
    add(Case("missing_column_validate", ["validate", nocol_csv, "--hardware", "h100-sxm"], 2, "cannot tell the kernel family"))
    nok = "\n".join(",".join(x for i, x in enumerate(ln.split(",")) if i != 5) for ln in gemm.splitlines())
    add(Case("missing_time_column_calibrate", ["calibrate", write(tmp, "missing_time.csv", nok + "\n"),
                                               "--hardware", "h100-sxm", "-o", tmp / "cal2.yaml"], 2,
             "missing column 'time_us'"))
    gz = gzip.compress(gemm.encode())
    add(Case("truncated_csv_gz", ["validate", write(tmp, "truncated.csv.gz", gz[: len(gz) // 2]), "--hardware",
                                  "h100-sxm"], 2, "truncated or corrupt"))
    add(Case("mem_capacity_inf", ["step", "--model", "llama-3.2-1b", "--hardware",
                                  write(tmp, "inf_cap.yaml", h100.replace("mem_capacity_bytes: 85.899e9",
                                                                          "mem_capacity_bytes: .inf")),
                                  "--batch", "1", "--context", "128"], 2, "mem_capacity_bytes: must be a finite number"))
    add(Case("study_batch_empty", ["study", write(tmp, "study_batch_empty.yaml",
                                                  small_study().replace("batch: [1, 4]", "batch: []")),
                                   "-o", tmp / "s1"], 2, "base: batch: give at least one value"))
    add(Case("study_nothing_to_run", ["study", write(tmp, "study_empty.yaml",
                                                     small_study().split("variants:")[0] + "include_base: false\n"),
                                      "-o", tmp / "s2"], 2, "nothing to run"))
    deep_yaml = write(tmp, "deep.yaml", "id: " + "[" * 5000 + "]" * 5000 + "\n")
    add(Case("yaml_nested_deep", ["step", "--model", "llama-3.2-1b", "--hardware", deep_yaml, "--batch", "1",
                                  "--context", "128"], 2, "nested more than"))
    deep_json = write(tmp, "deep_config.json", '{"a": ' + "[" * 100000 + "]" * 100000 + "}")
    add(Case("json_nested_deep", ["model", "import", deep_json], 2, "nested more than"))
    add(Case("batch_400_digits", ["step", *FAST, "--batch", "9" * 400, "--context", "128"], 2,
             "batch: must be <="))
    add(Case("batch_400_digits_predict", ["predict", *FAST, "--batch", "9" * 400, "--context", "128"], 2,
             "batch: must be <="))
    add(Case("max_draft_len_100000_recommend", ["recommend", *FAST, "--context", "1024", "--mechanisms", "eagle3",
                                                "--acceptance", "eagle3=0.8", "--max-draft-len", "100000"], 2,
             "max draft length: must be <= 256"))
    add(Case("max_draft_len_100000_pareto", ["pareto", *FAST, "--max-draft-len", "100000", "--no-plots",
                                             "-o", tmp / "md"], 2, "max draft length: must be <= 256"))

    # --- hangs
    add(Case("alias_bomb_profile", ["step", "--model", "llama-3.2-1b", "--hardware",
                                    write(tmp, "bomb.yaml", alias_bomb()), "--batch", "1", "--context", "128"], 2,
             "aliases"))
    add(Case("alias_bomb_study", ["study", write(tmp, "bomb_study.yaml", alias_bomb().replace("id:", "name:")),
                                  "-o", tmp / "s3"], 2, "aliases"))

    # --- silent nonsense
    big_ctx = tmp / "ctx31"
    # a user profile without max_context_len: the 2^31-token context is priced, and its column holds it exactly
    open_ctx = write(tmp, "llama-no-context-limit.yaml", "\n".join(
        ln for ln in (ROOT / "model_profiles" / "llama-3.2-1b.yaml").read_text().splitlines()
        if "max_context_len" not in ln))
    add(Case("context_2_31_pareto", ["pareto", "--model", str(open_ctx), "--hardware", "h100-sxm", *PARETO_SMALL,
                                     "--context", str(2**31), "-o", big_ctx], 0,
             "grid points", outdir=big_ctx, extra={"column": ("context_len", 2**31)}))
    add(Case("context_beyond_model_pareto", ["pareto", *FAST, *PARETO_SMALL, "--context", str(2**31), "-o",
                                             tmp / "ctx31b"], 2, "exceeds llama-3.2-1b's context of 131072 tokens"))
    add(Case("batch_2_31_study", ["study", write(tmp, "study_bigbatch.yaml",
                                                 small_study().replace("batch: [1, 4]", f"batch: [1, {2**31}]")),
                                  "-o", tmp / "s4"], 2, "base: batch: must be <= 16,777,216"))
    add(Case("draft_len_2_15_study", ["study", write(tmp, "study_bigd.yaml",
                                                     small_study().replace("max_draft_len: 2", "draft_len: [1, 32768]")),
                                      "-o", tmp / "s5"], 2, "base: draft length: must be <= 256"))
    add(Case("hardware_denormal", ["step", "--model", "llama-3.2-1b", "--hardware",
                                   write(tmp, "denormal.yaml", h100.replace("mem_bandwidth_bytes_s: 3.35e12",
                                                                            "mem_bandwidth_bytes_s: 1e-310")),
                                   "--batch", "1", "--context", "128"], 2, "mem_bandwidth_bytes_s: Input should be greater"))
    add(Case("hardware_inf_bandwidth", ["step", "--model", "llama-3.2-1b", "--hardware",
                                        write(tmp, "infbw.yaml", h100.replace("mem_bandwidth_bytes_s: 3.35e12",
                                                                              "mem_bandwidth_bytes_s: .inf")),
                                        "--batch", "1", "--context", "128", "--json"], 2,
             "mem_bandwidth_bytes_s: must be a finite number"))
    rows = gemm.splitlines()
    inf_row = rows[:]
    inf_row[2] = ",".join("inf" if i == 5 else x for i, x in enumerate(rows[2].split(",")))
    add(Case("validate_inf_row", ["validate", write(tmp, "inf_row.csv", "\n".join(inf_row) + "\n"), "--hardware",
                                  "h100-sxm", "--json"], 2, "column 'time_us', data row 2 (line 3)"))
    zero_row = rows[:]
    zero_row[4] = ",".join("0" if i == 5 else x for i, x in enumerate(rows[4].split(",")))
    add(Case("validate_zero_row", ["validate", write(tmp, "zero_row.csv", "\n".join(zero_row) + "\n"), "--hardware",
                                   "h100-sxm", "--json"], 2, "column 'time_us', data row 4 (line 5)"))
    zero_n = rows[:]
    zero_n[1] = ",".join("0" if i == 3 else x for i, x in enumerate(rows[1].split(",")))
    add(Case("validate_zero_size_row", ["validate", write(tmp, "zero_n.csv", "\n".join(zero_n) + "\n"),
                                        "--hardware", "h100-sxm", "--json"], 2, "column 'n', data row 1 (line 2): must be > 0"))

    # --- accepted though invalid
    add(Case("yaml_true_for_number", ["step", "--hardware", "h100-sxm", "--model",
                                      write(tmp, "true_layers.yaml", (MODELS / "llama-3.2-1b.yaml").read_text()
                                            .replace("num_layers: 16", "num_layers: true")),
                                      "--batch", "1", "--context", "128"], 2, "num_layers: Input should be a valid integer"))
    add(Case("yaml_true_for_float", ["step", "--model", "llama-3.2-1b", "--hardware",
                                     write(tmp, "true_bw.yaml", h100.replace("mem_bandwidth_bytes_s: 3.35e12",
                                                                             "mem_bandwidth_bytes_s: true")),
                                     "--batch", "1", "--context", "128"], 2, "mem_bandwidth_bytes_s: Input should be a valid number"))
    add(Case("module_dtypes_unknown_key", ["step", "--hardware", "h100-sxm", "--model",
                                           write(tmp, "md.yaml", (MODELS / "llama-3.2-1b.yaml").read_text()
                                                 + "module_dtypes: {atention: fp8}\n"),
                                           "--batch", "1", "--context", "128"], 2, "module_dtypes.atention: unknown module"))
    add(Case("duplicate_yaml_key", ["step", "--model", "llama-3.2-1b", "--hardware",
                                    write(tmp, "dupkey.yaml", h100 + "\nmem_bandwidth_bytes_s: 1.0e12\n"),
                                    "--batch", "1", "--context", "128"], 2, "duplicate key 'mem_bandwidth_bytes_s'"))
    add(Case("duplicate_json_key", ["model", "import", write(tmp, "dup_config.json",
                                                              json.dumps(llama)[:-1] + ', "hidden_size": 1}')],
             2, "hidden_size: duplicate key"))
    for n, v in (("zero", 0), ("null", None)):
        cfg = dict(mixtral, num_local_experts=v)
        add(Case(f"moe_{n}_experts", ["model", "import", write(tmp, f"moe_{n}_config.json", json.dumps(cfg))], 2,
                 "num_local_experts"))
    ad = ["adaptive", *FAST, "--context", "1024"]
    add(Case("adaptive_seed_negative", [*ad, "--trace", "0.9@8x30", "--seed", "-1"], 2, "seed: must be"))
    add(Case("adaptive_trace_unbounded", [*ad, "--trace", "0.9@8x100000000"], 2, "iterations"))
    add(Case("adaptive_policies_empty", [*ad, "--trace", "0.9@8x30", "--policies", ","], 2, "polic"))
    add(Case("adaptive_tiers_negative", [*ad, "--trace", "0.9@8x30", "--tiers", "-1,3"], 2, "tiers"))
    add(Case("adaptive_slo_negative", [*ad, "--trace", "0.9@8x30", "--slo-tpot-ms", "-5"], 2, "tpot"))
    add(Case("batch_max_zero", ["pareto", *FAST, "--batch-max", "0", "--no-plots", "-o", tmp / "bm0"], 2,
             "batch_max: must be >= 1"))

    # --- found by the fuzz suite itself
    mt = tmp / "mech_twice"
    add(Case("fuzz_mechanisms_twice_pareto", ["pareto", *FAST, "--batch-max", "4", "--max-draft-len", "2", "--tp",
                                              "1", "--mechanisms", "eagle3,eagle3", "--acceptance", "eagle3=0.7",
                                              "--no-plots", "--no-progress", "-o", mt], 0, "grid points", outdir=mt))
    acc = (ROOT / "specplan" / "data" / "acceptance_profiles" / "eagle3-llama-3.1-8b-mtbench.yaml").read_text()
    acc_null = write(tmp, "acc_null.yaml", "\n".join(ln for ln in acc.splitlines() if not ln.startswith("- ["))
                     .replace("points:", "points: null #"))
    add(Case("fuzz_acceptance_points_null", ["predict", *FAST, "--batch", "1", "--context", "128", "--mechanism",
                                             "eagle3", "--draft-len", "2", "--acceptance-profile", acc_null], 2,
             "points: expected a list of [D, AL] pairs"))
    digits = rows[:]
    digits[2] = ",".join("9" * 400 if i == 5 else x for i, x in enumerate(rows[2].split(",")))
    add(Case("fuzz_measured_400_digit_cell", ["validate", write(tmp, "digits.csv", "\n".join(digits) + "\n"),
                                              "--hardware", "h100-sxm"], 2, "column 'time_us', data row 2 (line 3): time must be finite"))
    nodt = "\n".join(",".join(x for i, x in enumerate(ln.split(",")) if i != 1) for ln in gemm.splitlines())
    add(Case("fuzz_missing_text_column", ["validate", write(tmp, "no_dtype.csv", nodt + "\n"), "--hardware",
                                          "h100-sxm"], 2, "missing column 'dtype' of a gemm table"))
    wl = ["--workload", ROOT / "examples" / "adaptive" / "workload.csv"]
    add(Case("fuzz_adaptive_tiers_huge", [*ad, *wl, "--tiers", "9" * 30], 2, "--tiers: position 1: must be <= 256"))
    add(Case("fuzz_adaptive_graph_bs_huge", [*ad, *wl, "--graph-max-bs", "9" * 25], 2, "--graph-max-bs: must be <="))
    add(Case("fuzz_adaptive_max_draft_len_huge", [*ad, *wl, "--max-draft-len", "9" * 40], 2,
             "--max-draft-len: must be <= 256"))
    return c
