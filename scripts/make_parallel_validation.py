"""Regenerate docs/validation/deepseek_r1_b200_mtp.md (specplan.parallel_validation.b200_mtp_report): the published
TensorRT-LLM DeepSeek-R1 MTP rows on 8 B200s predicted under the layout their notes give."""

from pathlib import Path

from specplan.io import atomic_write_text
from specplan.parallel_validation import b200_mtp_report

OUT = Path(__file__).resolve().parents[1] / "docs" / "validation" / "deepseek_r1_b200_mtp.md"

if __name__ == "__main__":
    atomic_write_text(OUT, b200_mtp_report())
    print(f"wrote {OUT}")
