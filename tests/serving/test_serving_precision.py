"""The serving path prices the checkpoint's own weight formats (issue 19 finding): gpt-oss-120b's MXFP4 experts
stay MXFP4 in the decode iteration instead of being re-read as 16-bit weights."""

import numpy as np

from specplan.costs.precision import Dtypes, resolve_precision
from specplan.model.step import step_time
from specplan.profiles.engine import engine_hardware
from specplan.profiles.registry import load_engine, load_hardware, load_model
from specplan.serving.aggregated import gpu_tables
from specplan.serving.workload import Workload
from specplan.serving.aggregated import StepOptions
from specplan.speculation.spec import Speculation


def test_mxfp4_experts_fit_one_h100_in_the_serving_path():
    """Hand count: gpt-oss-120b holds about 117 B parameters, 115 B of them in the experts: in 16-bit that is
    about 234 GB (no 80 GB H100 holds it); with MXFP4 experts (4.25 bits) about 61 GB + 4 GB of 16-bit rest."""
    m, hw = load_model("gpt-oss-120b"), load_hardware("h100-sxm")
    prec = resolve_precision(m, hw, None, None)
    assert prec.w("moe") == "mxfp4" and prec.compute == "bf16"
    wl = Workload(isl=128, osl=1024, concurrency=np.array([8.0]))
    none = StepOptions(Speculation("none", np.zeros(1)))
    t = gpu_tables(m, hw, 1, wl, load_engine("sglang"), none, prec, 8.0)
    assert bool(np.all(t.fits))
    # the iteration at batch 8 is the MXFP4 step, well under the 16-bit one (about 20 ms: 2.8 x the bytes)
    b8 = float(np.interp(np.log(8.0), t.log_b, np.asarray(t.iter_gpu_s).reshape(len(t.log_b), -1)[:, 0]))
    mx = float(step_time(m, hw, 1, 8, 1, wl.decode_context, precision=prec).total_s)
    bf = float(step_time(m, hw, 1, 8, 1, wl.decode_context, precision=Dtypes(dtype="bf16")).total_s)
    assert bf > 2.5 * mx
    sg = engine_hardware(hw, load_engine("sglang"))  # SGLang's counted MoE path (13 kernels per MXFP4 layer)
    mx_sg = float(step_time(m, sg, 1, 8, 1, wl.decode_context, precision=prec).total_s)
    assert abs(b8 / mx_sg - 1.0) < 0.05  # the engine's kernel families move it by a few per cent at most
