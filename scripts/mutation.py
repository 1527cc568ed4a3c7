"""Mutation testing of the model code (issue 26): a seeded sample of cosmic-ray mutants, each module's tests.

    python scripts/mutation.py --modules serving,speculation,planning,adaptive --sample 300 --seed 1   # long mode
    python scripts/mutation.py --modules adaptive --sample 20 --seed 1 --results /tmp/m.json          # resumable
    python scripts/mutation.py --report-only                                                          # md from JSON

Logic in specplan/validation/mutation.py; results go to docs/validation/mutation.json (appended after every mutant,
so a run can be stopped and resumed), the report to docs/validation/mutation.md. Needs the `dev` extra (cosmic-ray).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> int:
    from specplan.core.io import atomic_write_text
    from specplan.validation import mutation as mu

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--modules", default="serving,speculation,planning,adaptive",
                    help=f"groups, comma list (known: {', '.join(mu.GROUPS)})")
    ap.add_argument("--sample", type=int, default=300, help="mutants drawn (0: every site)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--results", default=str(ROOT / "docs/validation/mutation.json"))
    ap.add_argument("--report", default=str(ROOT / "docs/validation/mutation.md"))
    ap.add_argument("--notes", default=str(ROOT / "docs/validation/mutation_notes.json"),
                    help="JSON {mutant key: status} for survivors a test now kills or that are explained")
    ap.add_argument("--report-only", action="store_true", help="rewrite the report from the results JSON")
    ap.add_argument("--preface", default="", help="a paragraph put under the sample line (e.g. the machine, the time)")
    ap.add_argument("--workers", type=int, default=1, help="mutants run side by side (one scratch copy each)")
    ap.add_argument("--recheck", action="store_true", help="run the recorded survivors again (after adding tests)")
    ap.add_argument("--baseline", action="store_true", help="first check each module's tests pass unmutated")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per mutant's test run (a timeout kills)")
    ap.add_argument("--sample-rev", default=None,
                    help="git revision whose code the sample is drawn from (default: the results' own, else today's): "
                         "resumes a run's sample after the code moved; kept in the results")
    a = ap.parse_args()
    results = Path(a.results)
    if a.report_only:
        data = json.loads(results.read_text())
        meta, rows = data["meta"], data["results"]
    else:
        groups = [g for g in a.modules.split(",") if g]
        meta, rows = mu.run(groups, a.sample or None, a.seed, results=results, timeout_s=a.timeout,
                            baseline=a.baseline, recheck=a.recheck, workers=a.workers, sample_rev=a.sample_rev)
    notes = json.loads(Path(a.notes).read_text()) if Path(a.notes).is_file() else {}
    atomic_write_text(Path(a.report), mu.report(meta, rows, notes, a.preface) + "\n")
    print(f"wrote {a.report}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
