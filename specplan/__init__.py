"""specplan: analytical performance modeling and planning for speculative decoding of LLMs.

Kept import-light on purpose: the CLI and the GPU harness import submodules directly. The folders read as the
pipeline (docs/architecture.md).
"""

__version__ = "0.1.0"
