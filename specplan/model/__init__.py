"""A deployment of a model on devices: parallel layouts, one decode/verify step, memory (weights, KV, fits).
Above costs/ and profiles/, below speculation/."""
