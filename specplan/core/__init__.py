"""What every layer uses: errors, limits, the bounded loader, atomic writes, progress, dtypes, JSON values, table
writers. Imports nothing else from specplan."""
