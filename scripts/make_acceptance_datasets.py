"""Regenerate docs/acceptance_datasets.md (`--check` only reports a stale page): calls
specplan.docgen.acceptance_datasets.main."""

import sys

from specplan.docgen.acceptance_datasets import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
