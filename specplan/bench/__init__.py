"""Torch microbenchmark harness (optional extra: pip install 'specplan[bench]')."""
