"""Whole-step validation on the H200 -> docs/validation/step_h200.md: calls specplan.validation.step_h200.main
(`specplan validate-step` does the same)."""

from specplan.validation.step_h200 import main

if __name__ == "__main__":
    main()
