"""Regenerate docs/validation/deepseek_r1_b200_mtp.md: calls the package (`specplan validate-parallel`)."""

from specplan.cli.validate_cmd import validate_parallel

if __name__ == "__main__":
    validate_parallel()
