"""Serving tables priced once per distinct draft length equal the tables priced at every (concurrency, D) point."""

import dataclasses

import numpy as np

from specplan.costs.precision import resolve_precision
from specplan.profiles.registry import load_engine, load_hardware, load_model
from specplan.serving.aggregated import _PER_CONFIG, _gpu_tables, gpu_tables
from specplan.serving.disaggregated import disaggregated_pools
from specplan.serving.workload import Workload
from specplan.speculation.acceptance import Acceptance
from specplan.model.deployment import Deployment
from specplan.speculation.spec import Speculation
from specplan.serving.aggregated import StepOptions
from specplan.speculation.spec import Speculation


def test_aggregated_tables_equal_the_point_by_point_ones():
    m, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    prec = resolve_precision(m, hw, None, None)
    conc = np.array([[4.0], [32.0], [96.0]])
    d = np.array([[1.0, 3.0, 5.0]]) * np.ones((3, 1))  # each D repeated over the concurrencies
    wl = Workload(isl=512, osl=256, concurrency=conc)
    spec = StepOptions(Speculation("eagle3", d, Acceptance.from_length(2.0, 5)))
    eng = load_engine("vllm")
    fast = gpu_tables(m, hw, 1, wl, eng, spec, prec, 96.0)
    full = _gpu_tables(m, hw, 1, wl, eng, spec, prec, 96.0)
    for k in _PER_CONFIG:
        np.testing.assert_allclose(np.asarray(getattr(fast, k), float), np.asarray(getattr(full, k), float),
                                   rtol=1e-12, err_msg=k)
    np.testing.assert_array_equal(fast.log_b, full.log_b)


def test_disaggregated_pools_do_not_depend_on_how_often_a_d_repeats():
    # the same D column priced beside two concurrencies or alone gives the same pool answer at C = 32
    wl2 = Workload(isl=512, osl=256, concurrency=np.array([[8.0], [32.0]]))
    wl1 = dataclasses.replace(wl2, concurrency=np.array([[32.0]]))
    dep = Deployment("llama-3.1-8b", "h100-sxm", tp=1, engine="vllm")
    spec = Speculation("eagle3", np.array([[1.0, 3.0]]), Acceptance.from_length(1.8, 3))
    two = disaggregated_pools(dep, spec, wl2, [(1, 1)])[0]
    one = disaggregated_pools(dep, spec, wl1, [(1, 1)])[0]
    np.testing.assert_allclose(np.asarray(two["tpot_s"])[1], np.asarray(one["tpot_s"])[0], rtol=1e-9)


def test_a_per_point_spec_entry_keeps_point_by_point_pricing():
    from specplan.serving.aggregated import only_draft_len_varies

    d = np.array([[1.0, 3.0]]) * np.ones((2, 1))
    assert only_draft_len_varies(StepOptions(Speculation(draft_len=d, tree_tokens=8.0)))
    assert not only_draft_len_varies(StepOptions(Speculation(draft_len=d, tree_tokens=np.array([[4.0, 8.0], [6.0, 8.0]]))))
