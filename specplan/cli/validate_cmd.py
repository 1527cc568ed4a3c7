"""`specplan validate-kernels | validate-step | validate-eagle3 | validate-parallel | validate-round`: regenerate
the validation reports of a repository checkout (they read reference/ and bench_data/, which the wheel does not ship)."""

from __future__ import annotations

from pathlib import Path

import typer

from specplan.cli.app import app
from specplan.core.errors import SpecplanError

ROOT = Path(__file__).resolve().parents[2]


def _needs(rel: str) -> None:
    """One line when a report's input data is missing (an installed wheel, not a checkout)."""
    if not (ROOT / rel).exists():
        raise SpecplanError(f"{ROOT / rel}: not found; the validation reports run from a repository checkout "
                            f"(git clone, then pip install -e .)")


@app.command("validate-kernels")
def validate_kernels() -> None:
    """Fit H100 efficiencies on the TRT-LLM kernel rows, score vLLM/SGLang rows -> docs/validation/README.md."""
    _needs("reference/measured")
    from specplan.validation.kernels_report import main

    main()


@app.command("validate-step")
def validate_step() -> None:
    """Whole-step H200 rows of specplan's own harness -> docs/validation/step_h200.md."""
    _needs("bench_data/h200_step_llama8b.csv")
    from specplan.validation.step_h200 import main

    main()


@app.command("validate-eagle3")
def validate_eagle3() -> None:
    """EAGLE-3 speedup against D on Llama-3.1-8B -> docs/eagle3_llama8b_validation.md."""
    _needs("reference/specdec_public.csv")
    from specplan.validation.eagle3_sweep import main

    main()


@app.command("validate-parallel")
def validate_parallel() -> None:
    """TensorRT-LLM DeepSeek-R1 MTP rows on 8 B200 under their layout -> docs/validation/deepseek_r1_b200_mtp.md."""
    _needs("reference/specdec_public.csv")
    from specplan.core.io import atomic_write_text
    from specplan.validation.parallel import b200_mtp_report

    out = ROOT / "docs" / "validation" / "deepseek_r1_b200_mtp.md"
    atomic_write_text(out, b200_mtp_report())
    print(f"wrote {out}")


@app.command("validate-round")
def validate_round(
    csv_path: Path = typer.Option(..., "--csv", help="round.csv of specplan/bench/round_bench.py (a GPU run)."),
    out: Path = typer.Option(Path("docs/validation/round.md"), "-o", "--out", "--output", help="Report path."),
) -> None:
    """One speculative round of specplan's torch harness (draft, verify, rejection apart) against specplan."""
    if not csv_path.is_file():
        raise SpecplanError(f"--csv: {csv_path}: no such file")
    from specplan.validation.round_bench import main

    print(f"wrote {main(csv_path, out)}")


@app.command("validate-inferencex")
def validate_inferencex(
    out: Path = typer.Option(Path("docs/validation/inferencex.md"), "-o", "--out", "--output", help="Report path."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Print each acceptance rate as it is priced."),
) -> None:
    """InferenceX DeepSeek-R1 FP8 serving rows at their layouts, pools and engines -> docs/validation/inferencex.md
    (and the acceptance profile mtp-deepseek-r1-inferencex-random, fitted with each MTP setup left out)."""
    import sys

    _needs("reference/published/serving_public_inferencex.csv")
    from specplan.validation.inferencex import write_report

    say = (lambda s: print(s, file=sys.stderr, flush=True)) if progress else None
    for p in write_report(out, progress=say):
        print(f"wrote {p}")
