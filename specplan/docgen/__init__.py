"""Generated parts of docs/ and notebooks/: the speculation / hardware / cost-model tables and the notebooks.
Above everything it renders; nothing imports it."""
