"""Regenerate docs/validation/ (kernel tables, framework fits): calls specplan.validation.kernels_report.main
(`specplan validate-kernels` does the same)."""

from specplan.validation.kernels_report import main

if __name__ == "__main__":
    main()
