"""The answers: predict (one point), recommend (best point), recommend_serving (under a serving workload and an SLA),
capacity (GPUs for a load), sweep + frontier (grids). Above serving/ and speculation/."""
