"""Roofline kernel costs: one kernel family per module, numpy arrays in and out (broadcasting)."""
