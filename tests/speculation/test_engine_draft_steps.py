"""Each draft mechanism × each engine profile once: the engine's speculative host costs are charged per serial
draft step of the mechanism's own (issue 26), checked against the count stated here by hand.

Serial draft steps per iteration at D > 0 (docs/speculation.md, speculation/serving.py): a chain drafter runs D
forwards one after another (external draft LLM, EAGLE-3, MTP, self-speculation); Medusa evaluates its heads in one
pass, DFlash/DSpark draft all D positions in one forward (1 step); n-gram lookup runs on the host (0 steps).
So with an engine of draft-step cost s and iteration cost c, at D = 4:
    draft_s(engine) − draft_s(no host costs) = n · s,   verify_s(engine) − verify_s(no host costs) = c.
For vLLM (s, c as fitted in engine_profiles/vllm.yaml, e.g. s = 0.633 ms): Medusa/DFlash + s, n-gram + 0,
EAGLE-3 + 4 s.
"""

import numpy as np
import pytest

from specplan.profiles.registry import load_engine
from specplan.speculation.acceptance import Acceptance
from specplan.speculation.serving import PURE_ROOFLINE
from specplan.speculation.speedup import evaluate, evaluate_kw

D = 4
SERIAL_STEPS = {"external": D, "eagle3": D, "mtp": D, "self": D, "medusa": 1, "dflash": 1, "dspark": 1, "ngram": 0}
ENGINES = ("ideal", "vllm", "sglang", "trtllm")


def _eval(mech, engine, **kw):
    model = "deepseek-v3" if mech == "mtp" else "llama-3.1-8b"
    hw = "h200-sxm" if mech == "mtp" else "h100-sxm"
    extra = {"draft_model": "llama-3.2-1b"} if mech == "external" else {}
    tp = 8 if mech == "mtp" else 1
    return evaluate_kw(model, hw, tp=tp, batch=[1, 32], context_len=2048, draft_len=D, mechanism=mech,
                    acceptance=Acceptance.from_rate(0.7), engine=engine, **extra, **kw)


@pytest.mark.parametrize("mech", sorted(SERIAL_STEPS))
@pytest.mark.parametrize("engine", ENGINES)
def test_draft_host_cost_is_the_mechanisms_own_serial_steps(mech, engine):
    eng = load_engine(engine)
    with_costs = _eval(mech, engine)
    bare = _eval(mech, engine, serving=PURE_ROOFLINE)  # same kernels, no host costs
    n = SERIAL_STEPS[mech]
    np.testing.assert_allclose(with_costs["draft_s"] - bare["draft_s"], n * eng.spec_draft_step_overhead_s,
                               rtol=1e-9, atol=1e-15)
    np.testing.assert_allclose(with_costs["verify_s"] - bare["verify_s"], eng.spec_iteration_overhead_s,
                               rtol=1e-9, atol=1e-15)
    # and the speedup follows from the iteration as the engine runs it (issue 19: host, launches, graphs and the
    # round's extras over verify + draft): engine baseline step · AL / engine iteration
    al = (1 - 0.7 ** (D + 1)) / (1 - 0.7)
    np.testing.assert_allclose(with_costs["iter_s"], with_costs["verify_s"] + with_costs["draft_s"], rtol=1e-12)
    np.testing.assert_allclose(with_costs["speedup"], with_costs["engine_baseline_step_s"] * al
                               / with_costs["engine_iter_s"], rtol=1e-9)
    assert np.all(with_costs["engine_iter_s"] >= with_costs["iter_s"] - 1e-15)  # the engine only adds time
