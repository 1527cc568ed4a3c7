"""EAGLE-3 vs D on Llama-3.1-8B -> docs/eagle3_llama8b_validation.md: calls specplan.validation.eagle3_sweep.main
(`specplan validate-eagle3` does the same)."""

from specplan.validation.eagle3_sweep import main

if __name__ == "__main__":
    main()
