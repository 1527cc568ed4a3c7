"""Regenerate the example plots committed under docs/plots/ (pareto figures + the three example studies)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "docs" / "plots"


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        subprocess.run([sys.executable, "-m", "specplan", "pareto", "--model", "qwen3.5-122b-a10b",
                        "-H", "b200", "-H", "h200-sxm", "--batch-max", "256", "--max-draft-len", "12",
                        "--mechanisms", "mtp,dflash,ngram", "--acceptance", "mtp=0.8",
                        "--acceptance", "dflash=0.75", "--acceptance", "ngram=0.4", "--tp", "2,4,8",
                        "--context", "8k,32k", "--formats", "png,svg", "--figures", "all", "--no-progress",
                        "-o", str(tmp / "pareto")],
                       check=True)
        for p in sorted((tmp / "pareto").glob("*.*")):
            if p.suffix in (".png", ".svg"):
                shutil.copy(p, OUT / f"pareto_{p.name}")
        for y in sorted((REPO / "examples" / "studies").glob("*.yaml")):
            d = tmp / y.stem
            subprocess.run([sys.executable, "-m", "specplan", "study", str(y), "-o", str(d), "--no-progress"],
                           check=True)
            for p in sorted(d.glob("*.*")):
                if p.suffix in (".png", ".svg"):
                    shutil.copy(p, OUT / f"{y.stem}_{p.name}")
                if p.name == "summary.md":
                    shutil.copy(p, OUT / f"{y.stem}_summary.md")


if __name__ == "__main__":
    main()
