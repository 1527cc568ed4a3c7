"""Regenerate the generated tables in docs/speculation.md, hardware_profiles.md and cost_model.md (`--check`
only reports stale ones): calls specplan.docgen.speculation_tables.main."""

import sys

from specplan.docgen.speculation_tables import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
