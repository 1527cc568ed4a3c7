"""Engine MoE kernel counts (EngineProfile.moe_kernels): the kernels one MoE layer of the engine's default MoE path
launches besides the router GEMM, counted in the engine's code, each priced at the hardware's kernel_overhead_s."""

import dataclasses

import numpy as np
import pytest

from specplan.costs.moe import MOE_KERNELS, ExpertLayer, MoeKernel, moe_experts_cost
from specplan.model.step import step_time
from specplan.profiles.engine import EngineProfile, engine_hardware
from specplan.profiles.registry import load_engine, load_hardware, load_model

H100_KERNEL_S = 3.45e-6  # hardware_profiles/h100-sxm.yaml kernel_overhead_s


def test_each_counted_kernel_costs_one_kernel_overhead():
    """Hand count: 13 kernels instead of the generic 3 add 10 x 3.45 us to one MoE layer, whatever its size."""
    hw = load_hardware("h100-sxm")
    assert MOE_KERNELS == 3 and hw.kernel_overhead_s == H100_KERNEL_S
    for tokens in (1.0, 64.0):
        a = moe_experts_cost(hw, tokens, ExpertLayer(2880, 2880, 128, 4), "mxfp4", "bf16")
        b = moe_experts_cost(hw, tokens, ExpertLayer(2880, 2880, 128, 4), "mxfp4", "bf16", kernel=MoeKernel(13))
        assert float(b.time_s - a.time_s) == pytest.approx(10 * H100_KERNEL_S, rel=1e-9)


def test_engine_counts_apply_on_their_generation_and_format_only():
    h100, b200 = load_hardware("h100-sxm"), load_hardware("b200")
    sg = load_engine("sglang")
    assert engine_hardware(h100, sg).moe_kernels == {"mxfp4": 13, "bf16": 7, "fp8": 9}
    assert engine_hardware(b200, sg).moe_kernels == {}  # Blackwell runs other MoE paths: not counted
    assert h100.moe_kernels == {}  # the hardware profile itself is left as it is
    # gpt-oss-120b (36 MoE layers, MXFP4 experts): SGLang's count adds 36 x (13 - 3) launches and their time
    m = load_model("gpt-oss-120b")
    base = step_time(m, h100, 1, 1, 1, 600)
    sgl = step_time(m, engine_hardware(h100, sg), 1, 1, 1, 600)
    assert sgl.kernels - base.kernels == 36 * 10
    assert float(sgl.total_s - base.total_s) == pytest.approx(36 * 10 * H100_KERNEL_S, rel=1e-6)
    # a bf16 dense model has no MoE layer: the count changes nothing
    d = load_model("llama-3.1-8b")
    assert float(step_time(d, engine_hardware(h100, sg), 1, 8, 1, 2048).total_s) == pytest.approx(
        float(step_time(d, h100, 1, 8, 1, 2048).total_s), rel=1e-12)


def test_moe_kernels_are_sourced_and_bounded():
    sg = load_engine("sglang").model_dump()
    with pytest.raises(ValueError, match="moe_kernels.hopper.bf16"):
        EngineProfile.model_validate({**sg, "moe_kernels": {"hopper": {"bf16": 0}}})
    with pytest.raises(ValueError, match="missing for moe_kernels"):
        EngineProfile.model_validate({**sg, "sources": {k: v for k, v in sg["sources"].items() if k != "moe_kernels"}})
    with pytest.raises(ValueError, match="moe_kernels.Hopper: a GPU generation"):
        EngineProfile.model_validate({**sg, "moe_kernels": {"Hopper": {"bf16": 7}}})
    # a hardware YAML that carries counts itself is checked the same way (a negative count priced a negative step)
    hw = load_hardware("h100-sxm").model_dump()
    from specplan.profiles.hardware import HardwareProfile

    for bad, msg in (({"mxfp4": -1000000}, "moe_kernels.mxfp4: must be a whole number"),
                     ({"MXFP9": 3}, "moe_kernels.MXFP9")):
        with pytest.raises(ValueError, match=msg):
            HardwareProfile.model_validate({**hw, "moe_kernels": bad})
    assert HardwareProfile.model_validate({**hw, "moe_kernels": {"MXFP4": 5}}).moe_kernels == {"mxfp4": 5}


def test_sglang_gpt_oss_batch_1_baseline_with_its_counted_moe_kernels():
    """The measured SGLang gpt-oss-120b baseline on one H100 at batch 1: 212 output tokens/s (SpecDrift,
    reference/speculation_load/specdec_sweeps.csv). With SGLang's counted MoE path (13 kernels per layer) the
    model is within 10 %; with the generic 3 it was about 30 % fast (the gap: 36 x 10 kernels x 3.45 us)."""
    from specplan.validation.speculation_load import Priced, load_setups

    st = [s for s in load_setups()[0] if s.spec["id"] == "s2-gptoss-eagle3-sglang"][0]
    sel = st.loads == 1.0
    np.testing.assert_allclose(st.base_value[sel], [212.0])
    pred = Priced(st).baseline_metric()[sel]
    assert abs(pred[0] / 212.0 - 1.0) < 0.10, pred
    generic = dataclasses.replace(st, spec={**st.spec, "engine_overrides": {"moe_kernels": {}}})
    fast = Priced(generic).baseline_metric()[sel]
    assert fast[0] / 212.0 > 1.25, fast


def test_launch_counts_and_round_extras_use_the_engines_moe_path():
    """The serving path's launch count (eager steps pay a host cost per kernel) counts the engine's MoE kernels too:
    TensorRT-LLM's gpt-oss MXFP4 path adds 36 x (10 - 3) launches to a step. An engine-adjusted hardware copy is
    never adjusted again, by the same or another engine."""
    from specplan.costs.precision import resolve_precision
    from specplan.serving.aggregated import step_kernels

    m, hw = load_model("gpt-oss-120b"), load_hardware("h100-sxm")
    prec = resolve_precision(m, hw, None, None)
    trt = load_engine("trtllm")
    assert step_kernels(m, hw, 1, trt, prec) - step_kernels(m, hw, 1) == 36 * 7
    once = engine_hardware(hw, load_engine("sglang"))
    assert engine_hardware(once, trt) is once and engine_hardware(once, load_engine("sglang")) is once
