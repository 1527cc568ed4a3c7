"""Hypothesis strategies over specplan's CLI and every loader, and the bodies that run one drawn example.

An example is a plain description (a command line with file placeholders, or a loader call on a file); the body
writes the files it names (tests/fuzz/mutations.py: valid seeds with one thing broken) into a fresh folder, runs it
and returns the problems the judge finds (harness.judge). The CI test (test_fuzz.py) asserts there are none on a
few hundred seeded examples; `scripts/fuzz.py --n 10000` counts them over many more.
"""

from __future__ import annotations

import functools
import shutil
import tempfile
from pathlib import Path

from hypothesis import strategies as st

from cases import ROOT
from harness import judge, run_cli
from mutations import CANARY, file_spec, foreign_extra, materialize, seeds, yaml_mutation

# ---------------------------------------------------------------- value pools

GOOD_INTS = ["1", "2", "4", "8", "16", "32", "64"]
BAD_INTS = ["0", "-1", "-3", "9" * 400, str(2**31), str(2**63), str(2**64 + 1), "1.5", "1e3", "nan", "inf", "",
            "abc", "0x10", "-0", "1" * 20, "4 ", "+2", "٣", "1_000"]
GOOD_FLOATS = ["0.5", "0.7", "0.8", "0.95", "1", "150"]
BAD_FLOATS = ["0", "-0.1", "1.5", "nan", "inf", "-inf", "1e400", "1e-310", "abc", "", "9" * 400, "0.8.1", "1e308"]
GOOD_CONTEXTS = ["128", "1024", "4k", "32k", "0"]
BAD_CONTEXTS = ["-1", "9" * 400, str(2**31), str(2**33), "8kk", "k", "1.5k", "inf", "", "8m", "-4k", "1e9"]
MODEL_IDS = ["llama-3.2-1b", "llama-3.2-3b", "qwen3-4b", "mixtral-8x7b", "qwen3.5-35b-a3b", "deepseek-v3",
             "gpt-oss-20b", "nemotron-3.5-lightning-30b-a3b", "qwen3-next-80b-a3b"]
BAD_IDS = ["llama-3.2-1x", "", "x" * 300, "../../etc/passwd", "/nonexistent/m.yaml", "a/b", "h100 sxm", "-",
           "nul\x01l", "profile.yml", "~", "." * 260]
HW_IDS = ["h100-sxm", "h200-sxm", "b200", "a100-sxm-80gb", "mi300x", "groq-3-lpu", "gb200", "cpu-generic"]
DTYPES = ["bf16", "fp16", "fp8", "fp4", "int8", "fp7", "", "BF16", "float8"]
GOOD_DTYPES, BAD_DTYPES = ["bf16", "fp16", "fp8"], ["fp4", "int8", "fp7", "", "BF16", "float8"]
MECHS = ["eagle3", "mtp", "medusa", "dflash", "dspark", "ngram", "self", "external", "none", "eagle", "", "all"]

# ---------------------------------------------------------------- CLI strategies

BAD_SHARE = 0.12  # chance that one option gets a bad value: most commands get one bad value, many none


def _pick(good, bad):
    """A good value, or with probability BAD_SHARE a bad one."""
    good, bad = st.sampled_from(list(good)), st.sampled_from(list(bad))
    return st.integers(0, 99).flatmap(lambda u: bad if u < 100 * BAD_SHARE else good)  # (floats are not uniform)


ints = _pick(GOOD_INTS, BAD_INTS)
floats = _pick(GOOD_FLOATS, BAD_FLOATS)
contexts = _pick(GOOD_CONTEXTS, BAD_CONTEXTS)
models = st.one_of(_pick(MODEL_IDS, BAD_IDS), _pick(MODEL_IDS[:3], BAD_IDS), file_spec("model", 0.5),
                   file_spec("moe_model", 0.5))
hardware = st.one_of(_pick(HW_IDS, BAD_IDS), _pick(HW_IDS[:2], BAD_IDS), file_spec("hardware", 0.5), file_spec("lpu", 0.5))


def _opt(name: str, values, p: float = 0.5):
    """[name, value] with probability p, else []."""
    given = values.map(lambda v: [name, v])
    return given if p >= 1 else st.integers(0, 99).flatmap(lambda u: given if u < 100 * p else st.just([]))


def _join(*parts):
    return st.tuples(*parts).map(lambda t: [x for part in t for x in part])


def _accept():
    mech = _pick(["eagle3", "ngram", "dflash"], MECHS)
    val = _pick(GOOD_FLOATS[:4] + ["3.1@4", "0.9,0.8,0.7"], BAD_FLOATS + ["3@0", "9@4", "0.9,,", "@", "=", "x@y",
                                                                         "eagle3-llama-3.1-8b-mtbench"])
    return st.lists(st.tuples(mech, val).map(lambda t: ["--acceptance", f"{t[0]}={t[1]}"]), max_size=3).map(
        lambda ls: [x for item in ls for x in item])


def _base():
    return _join(st.just([]), models.map(lambda m: ["--model", m]), hardware.map(lambda h: ["--hardware", h]))


def _serving():
    """--serving: an engine id or an engine profile file (predict, recommend)."""
    serving = st.one_of(_pick(["roofline", "vllm-v1-eagle-2025", "vllm", "sglang", "trtllm", "ideal"],
                              ["nosuch", "", "x" * 300]), file_spec("engine", 0.5) if "engine" in seeds()
                        else st.just("vllm"))
    return _opt("--serving", serving, 0.2)


# serving options (issue 25): a load a user might give, or one value out of range / not finite
SERVING_LENS = ["128", "1024", "4k"]
BAD_LENS = BAD_INTS + ["100000000", str(2**31), "40000000"]
GOOD_LOADS = ["1", "4", "64", "1,8,64"]  # a list: predict prices each, recommend / pareto refuse it
BAD_LOADS = BAD_FLOATS + ["1e9", "1e-9", "1e-10", "1e300", "1000000", "1,,x", "4,0", ","]


def _engine_opt(p: float):
    """--engine: an engine id or a (mutated) engine YAML."""
    eng = st.one_of(_pick(["trtllm", "vllm", "sglang", "ideal"], ["nosuch", "", "x" * 300]),
                    file_spec("engine", 0.5) if "engine" in seeds() else st.just("vllm"))
    return _opt("--engine", eng, p)


def _serving_load(p: float = 0.3, load: bool = True):
    """--isl/--osl with a closed-loop concurrency or an open-loop request rate, engine, mode and pools."""
    lens = _join(st.just([]), _opt("--isl", _pick(SERVING_LENS, BAD_LENS), 1),
                 _opt("--osl", _pick(["1", "16", "128"], BAD_LENS), 0.95))
    rate = st.one_of(_opt("--concurrency", _pick(GOOD_LOADS, BAD_LOADS), 1),
                     _opt("--request-rate", _pick(["0.5", "5", "50", "0.5,5"], BAD_LOADS), 1), st.just([]))
    lay = _pick(["tp1", "tp2", "dp2ep2", "tp1dp2ep2"], ["x", "", "tp0", "dp3ep2", "tp99999"])
    mode = _join(st.just([]), _opt("--mode", _pick(["agg", "disagg"], ["x", "", "AGG"]), 0.25),
                 _opt("--pools", _pick(["1P1D", "2P3D"], ["0P1D", "1P", "x", "", "99999P1D"]), 0.1),
                 _opt("--prefill-layout", lay, 0.08), _opt("--decode-layout", lay, 0.08))  # pools' own (issue 38)
    full = _join(lens, rate if load else st.just([]), mode, _engine_opt(0.4))
    return st.integers(0, 99).flatmap(lambda u: full if u < 100 * p else st.just([]))


def _layout():
    """Parallel layout (--dp/--ep/--pp), engine (--serving) and kernel options of step/predict/recommend."""
    par = _pick(["1", "2"], BAD_INTS)
    return _join(st.just([]), _opt("--dp", par, 0.07), _opt("--ep", par, 0.07), _opt("--pp", par, 0.07),
                 _opt("--attention-style", st.sampled_from(["shared", "reread", "x", ""]), 0.1),
                 _opt("--routing", st.sampled_from(["random", "balanced", "x"]), 0.1),
                 _opt("--weight-dtype", st.sampled_from(DTYPES + ["int4"]), 0.1))


def step_cmd():
    return _join(st.just(["step"]), _base(), _layout(), _opt("--batch", ints, 1), _opt("--context", contexts, 1),
                 _opt("--tp", ints, 0.3), _opt("--q-len", ints, 0.3), _opt("--dtype", _pick(GOOD_DTYPES, BAD_DTYPES), 0.2),
                 _opt("--kv-dtype", _pick(GOOD_DTYPES, BAD_DTYPES), 0.2), _opt("--reserve", floats, 0.1),
                 st.sampled_from([[], ["--json"]]))


def predict_cmd():
    mech = _pick(["eagle3", "ngram", "dflash", "medusa"], MECHS)
    acceptance = st.one_of(  # one acceptance input (two of them is an error of its own, drawn by the bad share)
        _opt("--acceptance-rate", floats, 1), _opt("--acceptance-rate", floats, 1),
        _join(_opt("--acceptance-length", _pick(["1.5", "2.5"], BAD_FLOATS), 1), _opt("--acceptance-rate", floats, 0.1)),
        _opt("--acceptance-per-position", _pick(["0.9,0.8", "0.7"], ["0.9,,", "1.5,0.2", "nan", ""]), 1),
        _opt("--acceptance-profile", _pick(["eagle3-llama-3.1-8b-mtbench"], ["nosuch", "x" * 300]), 1))
    return _join(st.just(["predict"]), _base(), _layout(), _serving(), _opt("--batch", ints, 1),
                 _opt("--context", contexts, 1), _opt("--mechanism", mech, 0.9),
                 _opt("--draft-len", _pick(["1", "2", "4"], BAD_INTS), 0.9), _opt("--tp", ints, 0.2), acceptance,
                 _opt("--tree-tokens", ints, 0.05), _opt("--draft-kv-budget", ints, 0.05),
                 _opt("--draft-model", st.sampled_from(MODEL_IDS[:3] + ["eagle3-llama-3.1-8b"] + BAD_IDS[:3]), 0.1),
                 _opt("--draft-hardware", st.sampled_from(HW_IDS[:3] + BAD_IDS[:2]), 0.1),
                 _serving_load(0.3), st.sampled_from([[], ["--json"], ["--json"]]))


def recommend_cmd():
    mechs = st.lists(_pick(["eagle3", "ngram", "dflash"], MECHS), min_size=1, max_size=3).map(",".join)
    return _join(st.just(["recommend"]), _base(), _layout(), _serving(), _opt("--context", contexts, 1),
                 _opt("--mechanisms", mechs, 0.8), _accept(),
                 st.one_of(st.just([]), _opt("--batch", ints, 1), _opt("--target-tps-per-user", floats, 1)),
                 _opt("--max-draft-len", _pick(["1", "2", "4", "8"], BAD_INTS + ["100000", "257"]), 0.7),
                 st.sampled_from([[], ["--json"], ["--extrapolate"]]),
                 st.one_of(st.just([]), st.just([]), _join(  # capacity: the smallest GPU count for a total rate
                     _opt("--target-tps", _pick(["1000", "50000"], BAD_FLOATS), 1),
                     _opt("--target-tps-per-user", _pick(["20", "50"], BAD_FLOATS), 0.9),
                     _opt("--max-gpus", _pick(["8", "16", "72", "144"], BAD_INTS + ["100000", "1000000000"]), 0.5),
                     _opt("--isl", _pick(["1024", "128"], BAD_LENS), 0.5), _opt("--osl", _pick(["256"], BAD_LENS), 0.5))),
                 st.integers(0, 99).flatmap(lambda u: st.just([]) if u >= 30 else _join(  # the serving search
                     _serving_load(1.0, load=False), _opt("--concurrency", _pick(GOOD_LOADS, BAD_LOADS), 0.2),
                     _opt("--max-ttft-ms", _pick(["200", "2000"], BAD_FLOATS), 0.4),
                     _opt("--max-tpot-ms", _pick(["10", "50"], BAD_FLOATS), 0.4))))


def pareto_cmd():
    ctx = st.lists(contexts, min_size=1, max_size=2).map(",".join)
    return _join(st.just(["pareto"]), _base(), st.lists(hardware, max_size=1).map(
                     lambda hs: [x for h in hs for x in ("--hardware", h)]),
                 _opt("--batch-max", _pick(["1", "2", "4", "8"], BAD_INTS + ["100000"]), 1),
                 _opt("--batch-points", _pick(["2", "3", "4"], BAD_INTS), 0.3),
                 _opt("--max-draft-len", _pick(["0", "1", "2", "3"], BAD_INTS + ["100000"]), 1),
                 st.one_of(_opt("--tp", _pick(["1", "1,2"], BAD_INTS), 1),
                           _opt("--layouts", st.sampled_from(["tp1", "tp2", "tp1,tp2", "dp2", "tp2dp2ep4", "tp0",
                                                               "tp" + "9" * 30, "x", "", "tp1pp2"]), 1)),
                 _opt("--context", ctx, 0.7),
                 _opt("--mechanisms", st.lists(st.sampled_from(MECHS), min_size=1, max_size=2).map(",".join), 0.9),
                 _accept(), _opt("--per", st.sampled_from(["gpu", "device", "chip", ""]), 0.2),
                 _serving_load(0.15, load=False),
                 st.sampled_from([["--no-plots"]] * 12 + [[]]), st.just(["--no-progress"]),
                 st.sampled_from([["-o", "OUT"]] * 6 + [["-o", "AFILE"], ["-o", "AFILE/sub"], ["-o", "x" * 300],
                                                         ["-o", ""]]))


def study_cmd():
    return _join(st.just(["study"]), file_spec("study", 0.5).map(lambda f: [f]), st.just(["--no-progress"]),
                 st.sampled_from([["-o", "OUT"]] * 6 + [["-o", "AFILE"], ["-o", "AFILE/sub"]]))


def adaptive_cmd():
    seg = st.tuples(_pick(["0.9", "0.5", "0", "1"], ["1.5", "-0.1", "nan", "x"]),
                    _pick(["", "@8", "@32"], ["@0", "@-1", "@" + "9" * 40]),
                    _pick(["x30", "x100"], ["x0", "x-5", "x100000000", "x" + "9" * 30, "", "x1.5"])).map(
        lambda t: "".join(t))
    trace = st.lists(seg, min_size=1, max_size=3).map(",".join) | st.just("")
    load = st.one_of(
        _opt("--trace", trace, 1),
        _join(st.just([]), (file_spec("workload_csv", 0.5) if "workload_csv" in seeds() else st.just("x.csv")).map(
            lambda f: ["--workload", f])),
        _join(st.just([]), _opt("--request-rate", _pick(["2", "20"], BAD_FLOATS), 0.7),
              _opt("--concurrency", _pick(["4", "16"], BAD_INTS + ["100000"]), 0.4),
              _opt("--requests", _pick(["8", "20"], BAD_INTS + ["99999999"]), 0.9),
              _opt("--isl", _pick(["128", "512"], BAD_LENS), 0.5), _opt("--osl", _pick(["16", "64"], BAD_LENS), 0.9),
              st.one_of(_opt("--acceptance-rate", floats, 1), _opt("--acceptance-rate", floats, 1),
                        _opt("--acceptance-dist", _pick(["0.8", "beta:2,1", "uniform:0.3,0.9"], [
                            "beta:0,0", "uniform:0.9,0.3", "nope:1", "", "beta:" + "9" * 400]), 1)),
              _opt("--acceptance-drift", st.sampled_from(["0.9->0.4", "-0.2", "x", "", "2", "nan"]), 0.2)))
    engine = _join(st.just([]), _opt("--engine", st.sampled_from(["vllm", "sglang", "ideal", "nosuch", ""]), 0.2),
                   _opt("--max-ttft-ms", floats, 0.1), _opt("--prefill-budget", _pick(GOOD_INTS, BAD_INTS + ["1"]), 0.1),
                   _opt("--max-running", ints, 0.1), _opt("--graph-max-bs", _pick(GOOD_INTS + ["0"], BAD_INTS), 0.1),
                   _opt("--sglang-initial-steps", ints, 0.1),
                   _opt("--captured-d", st.sampled_from(["1,3,7", "0", "-1", "a", ""]), 0.1),
                   _opt("--simulator", st.sampled_from(["adaptive", "serving", "serving", "nope", ""]), 0.2))
    pol = st.lists(st.sampled_from(["fixed:3", "sglang", "model", "oracle", "adasd", "fixed:", "fixed:-1", "nope",
                                    "fixed:99999", "static:3", "ema", "model:slo=0", "model:acc=x", ""]),
                   max_size=4).map(",".join)
    return _join(st.just(["adaptive"]), _base(), _opt("--context", contexts, 0.5), load, engine,
                 _opt("--policies", pol, 0.5), _opt("--max-draft-len", _pick(["2", "4", "8"], BAD_INTS), 0.4),
                 _opt("--tiers", st.sampled_from(["1,3,7", "1", "", "-1,2", "0", "a,b", "9" * 30, "1,,3"]), 0.3),
                 _opt("--slo-tpot-ms", floats, 0.2), _opt("--seed", _pick(["0", "1", "42"], BAD_INTS), 0.3),
                 st.sampled_from([[], ["--json"]]))


def profiles_cmd():
    return st.one_of(st.just(["profiles", "list"]), st.just(["profiles", "list", "--json"]),
                     st.one_of(st.sampled_from(MODEL_IDS + HW_IDS + BAD_IDS), file_spec("hardware", 0.5),
                               file_spec("model", 0.5), file_spec("lpu", 0.5)).map(lambda r: ["profiles", "show", r]))


def import_cmd():
    return _join(st.just(["model", "import"]),
                 st.one_of(file_spec("hf", 0.5), file_spec("hf_moe", 0.5), file_spec("hf_mla", 0.5)).map(lambda f: [f]),
                 st.sampled_from([[], [], ["-o", "OUT/m.yaml"], ["-o", "AFILE/x.yaml"], ["-o", "OUT"]]))


def validate_cmd():
    return _join(st.just(["validate"]), st.one_of(file_spec("gemm_csv", 0.5), file_spec("attention_csv", 0.5)).map(lambda f: [f]),
                 hardware.map(lambda h: ["--hardware", h]), st.sampled_from([[], ["--json"], ["-o", "OUT"],
                                                                               ["-o", "AFILE"]]),
                 _opt("--min-time-us", floats, 0.1), _opt("--max-m", ints, 0.1))


def calibrate_cmd():
    return _join(st.just(["calibrate"]), file_spec("gemm_csv", 0.5).map(lambda f: [f]),
                 st.sampled_from(HW_IDS[:2] + BAD_IDS[:2]).map(lambda h: ["--hardware", h]),
                 st.sampled_from([["-o", "OUT/cal.yaml"]] * 4 + [["-o", "AFILE/x.yaml"], ["-o", "OUT"]]))


def misc_cmd():
    return st.sampled_from([[], ["--help"], ["nosuch"], ["step"], ["step", "--help"], ["pareto", "--bogus"],
                            ["bench", "nothing", "-o", "OUT/b.csv"], ["bench", "gemm", "-o", "OUT/b.csv"],
                            ["bench", "gemm", "--model", "llama-3.2-1b", "--device", "cuda", "-o", "AFILE/b.csv"],
                            ["profiles"], ["model"], ["--version"],
                            ["validate-serving", "-o", "AFILE", "--no-progress"],  # refused before minutes of fitting
                            ["validate-serving", "-o", "AFILE/sub", "--no-progress"],
                            ["validate-serving", "-o", "OUT", "--no-progress"]])  # the whole fit: within the limit


def serving_cmd():
    """predict / recommend / pareto with a serving workload always (issue 25), and the GPUs-for-a-load search."""
    base = _join(_base(), _serving_load(1.0, load=False), st.sampled_from([[], ["--json"], ["--json"]]))
    mech = _join(_opt("--mechanisms", st.sampled_from(["eagle3", "ngram", "eagle3,ngram", "nope"]), 0.7), _accept(),
                 _opt("--max-draft-len", _pick(["0", "1", "2", "4"], BAD_INTS), 0.9))
    load = st.one_of(_opt("--concurrency", _pick(GOOD_LOADS, BAD_LOADS), 1),
                     _opt("--request-rate", _pick(["0.5", "5", "50", "0.5,5"], BAD_LOADS), 1))
    predict = _join(st.just(["predict"]), base, load, _opt("--mechanism", _pick(["eagle3", "ngram"], MECHS), 0.8),
                    _opt("--draft-len", _pick(["1", "2", "4"], BAD_INTS), 0.8),
                    _opt("--acceptance-rate", _pick(["0.6", "0.8"], BAD_FLOATS), 0.8))
    recommend = _join(st.just(["recommend"]), base, mech, _opt("--concurrency", _pick(GOOD_LOADS, BAD_LOADS), 0.2),
                      _opt("--max-ttft-ms", _pick(["200", "2000"], BAD_FLOATS), 0.4),
                      _opt("--max-tpot-ms", _pick(["10", "50"], BAD_FLOATS), 0.4))
    pareto = _join(st.just(["pareto"]), base, mech, st.just(["--no-plots", "--no-progress", "-o", "OUT"]))
    gpus = _join(st.just(["recommend"]), _base(), _opt("--target-tps", _pick(["1000", "50000"], BAD_FLOATS), 1),
                 _opt("--target-tps-per-user", _pick(["20", "50"], BAD_FLOATS), 0.9),
                 _opt("--max-gpus", _pick(["8", "16", "72", "144"], BAD_INTS + ["1000000000"]), 0.5),
                 st.one_of(_join(_opt("--isl", _pick(SERVING_LENS, BAD_LENS), 1), _opt("--osl", _pick(["256"], BAD_LENS), 1)),
                           _opt("--context", contexts, 1)), st.sampled_from([[], ["--json"]]))
    return st.one_of(predict, predict, recommend, pareto, gpus)


COMMANDS = {"serving": serving_cmd, "step": step_cmd, "predict": predict_cmd, "recommend": recommend_cmd, "pareto": pareto_cmd,
            "study": study_cmd, "adaptive": adaptive_cmd, "profiles": profiles_cmd, "import": import_cmd,
            "validate": validate_cmd, "calibrate": calibrate_cmd, "misc": misc_cmd}
WEIGHTS = {"serving": 4, "step": 4, "predict": 4, "recommend": 3, "pareto": 2, "study": 2, "adaptive": 2, "profiles": 2,
           "import": 3, "validate": 2, "calibrate": 1, "misc": 1}


def cli_invocation(only=None):
    """(command family, argv with placeholders) over every command (or the families in `only`)."""
    fams = [f for f, w in WEIGHTS.items() for _ in range(w) if not only or f in only]
    return st.sampled_from(fams).flatmap(lambda f: COMMANDS[f]().map(lambda argv: (f, argv)))


@functools.lru_cache(maxsize=1)
def _click_group():
    """The click group of the typer app, built once per process (typer builds it anew on each call)."""
    import typer.main

    from specplan.cli import app

    return typer.main.get_command(app)


def _options_of(argv: list) -> set[str] | None:
    """The option names the command of `argv` takes (from the typer app), None when it is not a command."""
    cmd = _click_group()
    for word in argv:
        sub = getattr(cmd, "commands", {}).get(word) if isinstance(word, str) else None
        if sub is None:
            break
        cmd = sub
    if getattr(cmd, "commands", None):
        return None
    return {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)}


def known_options(argv: list) -> list:
    """`argv` without the options its command does not have (and their values): the strategies draw options
    for a family of commands, each command keeps its own; misspelled options are the misc family's job."""
    have = _options_of(argv)
    if have is None:
        return argv
    out, i = [], 0
    while i < len(argv):
        a = argv[i]
        if isinstance(a, str) and a.startswith("--") and a not in have:
            i += 1 if a in ("--json", "--no-plots", "--no-progress", "--extrapolate") else 2
            continue
        out.append(a)
        i += 1
    return out


def run_invocation(family: str, argv: list, timeout_s: float = 60.0):
    """Materialize and run one CLI invocation in a fresh folder; (Result, problems)."""
    if family != "misc":
        argv = known_options(argv)
    folder = Path(tempfile.mkdtemp(prefix="specplan-fuzz-"))
    old = Path.cwd()
    try:
        import os

        os.chdir(folder)  # a canary written by a YAML payload would land here
        (folder / "afile").write_text("a file\n")
        n = [0]
        out = folder / "out"
        args = []
        for a in argv:
            a = materialize(a, folder, n)
            if isinstance(a, str):
                a = a.replace("AFILE", str(folder / "afile")).replace("OUT", str(out))
            args.append(a)
        r = run_cli(args, timeout_s)
        if r.rc == 130:  # the fuzz run itself got Ctrl-C / SIGTERM (the CLI turned it into exit 130)
            raise KeyboardInterrupt
        given = " ".join(a[3] if isinstance(a, tuple) else str(a) for a in argv)  # what the user typed or wrote
        probs = judge(r, out, folder / CANARY, allowed_rc=(0, 1, 2), inputs=given)
        return r, probs
    finally:
        os.chdir(old)
        shutil.rmtree(folder, ignore_errors=True)


# ---------------------------------------------------------------- loader strategies

def loader_call():
    """(loader name, file placeholder) over every loader."""
    s = seeds()
    options = [("hardware", file_spec("hardware")), ("hardware", file_spec("lpu")), ("model", file_spec("model")),
               ("model", file_spec("moe_model")), ("study", file_spec("study")), ("hf_import", file_spec("hf")),
               ("hf_import", file_spec("hf_moe")), ("hf_import", file_spec("hf_mla")),
               ("measured", file_spec("gemm_csv")), ("measured", file_spec("attention_csv")),
               ("yaml", file_spec("study")), ("json", file_spec("hf")),
               *[("hf_foreign", foreign_extra(s[k]).map(lambda t, k=k: ("FILE", k, "_config.json", t)))
                 for k in ("hf", "hf_moe", "hf_mla")],
               ("acceptance", yaml_mutation((ROOT / "specplan" / "data" / "acceptance_profiles" /
                                             "eagle3-llama-3.1-8b-mtbench.yaml").read_text()).map(
                   lambda t: ("FILE", "acc", ".yaml", t)))]
    if "engine" in s:
        options.append(("engine", file_spec("engine")))
    if "kernel" in s:
        options.append(("kernel", file_spec("kernel")))
    return st.sampled_from(range(len(options))).flatmap(lambda i: options[i][1].map(lambda f: (options[i][0], f)))


def run_loader(name: str, spec, timeout_s: float = 60.0) -> list[str]:
    """Call one loader on a materialized file; problems = anything but success or a one-line SpecplanError."""
    import os
    import signal
    import time
    import traceback

    from harness import Hang, _alarm
    from specplan.core.errors import SpecplanError

    folder = Path(tempfile.mkdtemp(prefix="specplan-fuzz-"))
    old = Path.cwd()
    os.chdir(folder)
    probs = []
    prev = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout_s)
    t0 = time.perf_counter()
    try:
        path = materialize(spec, folder, [0])
        try:
            _call_loader(name, path)
        except SpecplanError as exc:
            msg = str(exc)
            if "\n" in msg or not msg.strip():
                probs.append(f"{name}: error not one line: {msg[:200]!r}")
            elif len(msg) > 2000:
                probs.append(f"{name}: {len(msg)}-character error line")
    except Hang:
        probs.append(f"{name}: hang (> {timeout_s:.0f} s)")
    except KeyboardInterrupt:
        raise
    except BaseException:  # noqa: BLE001
        probs.append(f"{name}: traceback: " + traceback.format_exc().strip().splitlines()[-1])
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, prev)
        os.chdir(old)
        if (folder / CANARY).exists():
            probs.append(f"{name}: code execution (canary created)")
        shutil.rmtree(folder, ignore_errors=True)
    if time.perf_counter() - t0 > timeout_s:
        probs.append(f"{name}: slow ({time.perf_counter() - t0:.0f} s)")
    return probs


def _call_loader(name: str, path: str) -> None:
    from specplan.core import loader
    from specplan.profiles import registry

    if name == "yaml":
        loader.read_yaml(path, mapping=False)
    elif name == "json":
        loader.read_json(path, mapping=False)
    elif name == "hardware":
        _finite_profile(registry.load_hardware(path))
    elif name == "model":
        _finite_profile(registry.load_model(path))
    elif name == "engine":
        _finite_profile(registry.load_engine(path))
    elif name == "kernel":
        _finite_profile(registry.load_kernel_family(path))
    elif name == "study":
        from specplan.study.spec import expand, load_study

        expand(load_study(path))
    elif name == "hf_import":
        from specplan.profiles.hf_import import import_hf_config

        _finite_profile(import_hf_config(path))
    elif name == "hf_foreign":  # a valid config plus a field specplan does not read: it must import (issue 22)
        from specplan.core.errors import SpecplanError
        from specplan.profiles.hf_import import import_hf_config

        try:
            _finite_profile(import_hf_config(path))
        except SpecplanError as exc:
            raise AssertionError(f"a field the importer does not read stopped the import: {exc}") from None
    elif name == "measured":
        from specplan.bench.families import check_measured, detect_family, read_measured

        df = read_measured(path)
        check_measured(df, detect_family(df.columns), path)
    elif name == "acceptance":
        from specplan.speculation.acceptance import Acceptance

        Acceptance.from_profile(path).al(4)


def _finite_profile(p) -> None:
    """A loaded profile holds only finite numbers and 64-bit integers (else an AssertionError = a finding)."""
    import math

    stack = [p.model_dump()]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
        elif isinstance(v, float):
            assert math.isfinite(v), f"non-finite {v} in a loaded profile"
        elif isinstance(v, int) and not isinstance(v, bool):
            assert abs(v) < 2**63, f"integer {v} beyond 64 bits in a loaded profile"
