"""specplan: analytical performance modeling and planning for speculative decoding of LLMs.

Kept import-light on purpose: the CLI and the GPU harness import submodules directly. The folders read as the
pipeline (docs/architecture.md); module paths from before that layout stay importable for one release
(specplan.core.aliases).
"""

from specplan.core import aliases as _aliases

_aliases.register()

__version__ = "0.1.0"
