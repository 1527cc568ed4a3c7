"""What a serving engine adds to steps: workloads, prefill, aggregated and disaggregated serving (above
specplan.model.step and specplan.speculation, below sweep / recommend)."""
