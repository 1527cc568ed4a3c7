"""Adaptive speculation at request level: workloads, step costs, policies, the simulator, bounds and metrics.

Modules: workload (requests, acceptance laws, `--trace` segments), costs (step/prefill/memory tables, CUDA
graphs), sglang_policy (SGLang 0.5.23's rule), policies, simulator (request level), trace (segment shorthand and
its exact bounds), bounds (clairvoyant bound of a request-level run), metrics, run (entry points).
docs/adaptive.md describes the model, the policies and the proofs of the bounds.
"""

from specplan.adaptive.run import run_requests, run_trace  # noqa: F401
from specplan.adaptive.simulator import Engine  # noqa: F401
from specplan.adaptive.workload import Segment, Workload, build_workload, parse_trace  # noqa: F401
