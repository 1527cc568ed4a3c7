"""Write notebooks/02_guidelines.ipynb and notebooks/03_what_if.ipynb (unexecuted; CI executes every notebook,
tests/docgen/test_notebook.py). Run: python scripts/make_notebooks.py (calls main)"""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

ROOT = Path(__file__).resolve().parents[2]  # the repository (reports read reference/ and write docs/)

GUIDELINES = [
    new_markdown_cell("""# The five guidelines, reproduced from the model

Each guideline of `reference/seeds/guidelines_recovered.md` (the speculative-decoding post's five rules)
recomputed with specplan's roofline on small grids: G1 verify GEMMs against B·(1 + D) and the ridge;
G2/G3 attention against D for G = 4 … 64 with the 128-row tile steps; G4 the draft overhead ρD at low
latency; G5 mechanisms compared by speedup, not by acceptance length. Every cell checks what it plots."""),
    new_code_cell("""import os
import tempfile
from pathlib import Path

import numpy as np
from IPython.display import Image, display
from matplotlib.figure import Figure
from matplotlib.backends.backend_agg import FigureCanvasAgg

from specplan.profiles.registry import load_hardware, load_model
from specplan.model.step import step_time
from specplan.speculation.acceptance import Acceptance
from specplan.speculation.guidelines import attention_tile_d, ridge_tokens
from specplan.model.deployment import Deployment
from specplan.speculation.spec import DraftPlacement, Speculation
from specplan.speculation.speedup import evaluate

MODEL, HW = load_model('llama-3.1-8b'), load_hardware('h100-sxm')

# Figures go to $SPECPLAN_FIGURES when set, else to a temporary folder: nothing is written next to the notebook.
FIGURES = Path(os.environ.get('SPECPLAN_FIGURES') or tempfile.mkdtemp(prefix='specplan_guidelines_'))
FIGURES.mkdir(parents=True, exist_ok=True)
print('figures in', FIGURES)

def show(fig, name):
    FigureCanvasAgg(fig)
    fig.savefig(FIGURES / name, dpi=90)
    display(Image(str(FIGURES / name)))"""),
    new_markdown_cell("""## Guideline 1: verify GEMMs turn compute-bound at B·(1 + D) ≈ the ridge

The GEMM time of one verify step stays flat while the weights stream (memory-bound) and then grows with the
tokens B·(1 + D) once it passes the ridge (FLOP/byte of the device × bytes per weight / 2). A larger D gets
there with a smaller batch — without more KV cache."""),
    new_code_cell("""d = np.arange(0, 16)
fig = Figure(figsize=(7, 4)); ax = fig.subplots()
r0 = step_time(MODEL, HW, 1, 1, 1, 4096)
ridge = ridge_tokens(MODEL, HW, r0.precision, effective=True)
for b in (4, 16, 64):
    r = step_time(MODEL, HW, 1, b, 1 + d, 4096)
    ax.plot(b * (1 + d), r.breakdown_s['gemm'] * 1e3, 'o-', ms=3, label=f'B = {b}')
ax.axvline(ridge, color='k', ls=':', label=f'effective ridge {ridge:.0f} tokens')
ax.set_xscale('log'); ax.set_xlabel('GEMM rows B·(1 + D) (tokens)'); ax.set_ylabel('verify GEMM time per step (ms)')
ax.set_title('G1: GEMM time vs B·(1 + D), llama-3.1-8b on h100-sxm'); ax.legend(); ax.grid(alpha=0.3)
show(fig, 'g1_gemm.png')
# check: below the ridge the GEMM time barely moves, far above it grows about linearly with the tokens
small = step_time(MODEL, HW, 1, 4, np.array([1, 8]), 4096).breakdown_s['gemm']
big = step_time(MODEL, HW, 1, 64, np.array([8, 16]), 4096).breakdown_s['gemm']
print(f'ridge {ridge:.0f} tokens; B = 4, D 0 -> 7: x{small[1] / small[0]:.2f}; B = 64, D 7 -> 15: x{big[1] / big[0]:.2f}')
assert small[1] / small[0] < 1.2 and big[1] / big[0] > 1.6
# the ridge by hand from the H100 spec sheet: 989.4 TFLOP/s bf16 / 3.35 TB/s = 295 FLOP/byte; a bf16 weight is
# 2 bytes and 2 FLOPs per token, so the weights stop streaming at M = 295 tokens (the effective ridge applies the
# measured GEMM fractions); with D = 7 one eighth of that batch gets there (the post: 'one eighth of the batch')
peak = ridge_tokens(MODEL, HW, r0.precision, effective=False)
assert abs(peak - 989.4e12 / 3.35e12) < 0.5
assert np.ceil(peak / (1 + 7)) == np.ceil(np.ceil(peak) / 8)"""),
    new_markdown_cell("""## Guidelines 2 and 3: attention against D for G = 4 … 64, 128-row tiles

One KV head serves G·(1 + D) query rows; the kernel works in 128-row tiles, so D = 128/G − 1 rides free
(G2) and past it the runtime steps each time G·(1 + D) crosses a multiple of 128 (G3: prefer those D)."""),
    new_code_cell("""from specplan.planning.figures import attention_tile_curves

groups = (4, 8, 16, 32, 64)
d, curves = attention_tile_curves(HW, groups=groups, context_len=32768, batch=8, head_dim=128, kv_heads=8,
                                  max_draft_len=40)
fig = Figure(figsize=(7, 4)); ax = fig.subplots()
for g, t in curves.items():
    line, = ax.plot(d, (1 + d) / t / ((1 + d[0]) / t[0]), marker='.', label=f'G = {g}')
    ax.axvline(attention_tile_d(g), color=line.get_color(), lw=0.8, ls=':')
ax.set_xlabel('draft length D (tokens per iteration)'); ax.set_ylabel('attention throughput / D = 0 (x)')
ax.set_title('G2/G3: attention throughput vs D at 32K (dotted: D = 128/G - 1)'); ax.legend(); ax.grid(alpha=0.3)
show(fig, 'g2_attention.png')
for g, t in curves.items():
    k = attention_tile_d(g)  # 128/G - 1 (G = 64 -> 1)
    flat = t[k] / t[0]
    step = t[k + 1] / t[k] if k + 1 < t.size else float('nan')
    print(f'G = {g:2d}: D = 128/G - 1 = {k:2d}; runtime(D = {k}) / runtime(0) = {flat:.2f}, next D x{step:.2f}')
    assert flat < 1.1 and step > 1.2  # free up to the tile edge, then a step
# the post's numbers (Guideline 2, derived): G = 4 -> 31, 8 -> 15, 16 -> 7, 32 -> 3, 64 -> 1
assert [attention_tile_d(g) for g in groups] == [31, 15, 7, 3, 1]"""),
    new_markdown_cell("""## Guideline 4: at very low latency the draft overhead ρD decides

At batch 1 fixed kernel costs dominate and speedup → AL / (1 + ρD), with ρ the draft-to-target layer ratio.
A serial one-layer head (EAGLE-3) pays ρ per drafted token; a parallel drafter (DFlash) pays its layers once."""),
    new_code_cell("""d = np.arange(1, 13)
acc = Acceptance.from_rate(0.8)
closed = {'eagle3': lambda al, rho: al / (1 + rho * d),  # one layer, run D times in series
          'dflash': lambda al, rho: al / (1 + rho)}       # its layers once, D tokens in one pass
fig = Figure(figsize=(7, 4)); ax = fig.subplots()
sp = {}
for mech, form in closed.items():
    r = evaluate(Deployment(MODEL, HW), Speculation(mech, d, acc), batch=1, context_len=1024)
    sp[mech], al, rho = r['speedup'].ravel(), r['acceptance_length'].ravel(), float(r['rho'].ravel()[0])
    line, = ax.plot(d, sp[mech], 'o-', label=f'{mech}: model')
    ax.plot(d, form(al, rho), '--', color=line.get_color(), label=f'{mech}: closed form (ρ = {rho:.3f})')
    err = np.max(np.abs(sp[mech] / form(al, rho) - 1))
    print(f'{mech}: layer ratio ρ = {rho:.4f}, best D {int(d[np.argmax(sp[mech])])}, max speedup {sp[mech].max():.2f}, '
          f'model vs closed form within {100 * err:.0f}%')
    assert err < 0.15
    # the post's example: ρ = L_draft / L_target on a 32-layer target: a one-layer head 1/32 (O_d = 11/32 at
    # D = 11), a five-layer DFlash 5/32 (O_d = 5/32, once)
    assert rho == {'eagle3': 1 / 32, 'dflash': 5 / 32}[mech]
ax.set_xlabel('draft length D (tokens per iteration)'); ax.set_ylabel('speedup at batch 1 (x)')
ax.set_title('G4: batch-1 speedup against D, α = 0.8'); ax.legend(); ax.grid(alpha=0.3)
show(fig, 'g4_rho.png')
assert sp['dflash'][-1] > sp['eagle3'][-1]  # at D = 12 the serial head's ρD overhead costs more"""),
    new_markdown_cell("""## Guideline 5: compare mechanisms by speedup, not by acceptance length

A mechanism with a higher AL can still lose when its draft costs more time per iteration."""),
    new_code_cell("""d = np.arange(1, 9)
cases = {'external': (0.85, DraftPlacement('llama-3.2-1b')), 'eagle3': (0.75, DraftPlacement()),
         'dflash': (0.7, DraftPlacement()), 'ngram': (0.4, DraftPlacement())}
fig = Figure(figsize=(10, 4)); a1, a2 = fig.subplots(1, 2)
best = {}
for mech, (rate, draft) in cases.items():
    r = evaluate(Deployment(MODEL, HW), Speculation(mech, d, Acceptance.from_rate(rate), draft), batch=8,
                 context_len=4096)
    a1.plot(d, r['acceptance_length'].ravel(), 'o-', label=mech)
    a2.plot(d, r['speedup'].ravel(), 'o-', label=mech)
    best[mech] = (float(r['acceptance_length'].max()), float(r['speedup'].max()))
a1.set_ylabel('acceptance length AL (tokens)'); a2.set_ylabel('speedup over D = 0 (x)')
for a in (a1, a2):
    a.set_xlabel('draft length D (tokens per iteration)'); a.legend(); a.grid(alpha=0.3)
fig.suptitle('G5: llama-3.1-8b on h100-sxm, batch 8, 4K context')
show(fig, 'g5_mechanisms.png')
by_al = max(best, key=lambda m: best[m][0]); by_speedup = max(best, key=lambda m: best[m][1])
print('highest AL:', by_al, '; highest speedup:', by_speedup, {m: tuple(round(x, 2) for x in v) for m, v in best.items()})
assert by_al == 'external'  # the highest acceptance ...
assert by_speedup != by_al  # ... is not the fastest: its draft costs a full small-model forward per token"""),
]

WHAT_IF = [
    new_markdown_cell("""# What-if study: load a YAML study, run it, plot it

`examples/studies/bandwidth_h100_h200_b200.yaml` (H100 → H200 → B200, and an H100 with only its bandwidth
scaled) on a smaller grid so that the notebook runs in seconds; the study schema is in `docs/studies.md`."""),
    new_code_cell("""import tempfile
from pathlib import Path
from IPython.display import Image, Markdown, display

from specplan.profiles.registry import read_yaml
from specplan.study.spec import example_study_path, expand, load_study
from specplan.plots.study_plots import run_study

study = read_yaml(example_study_path('bandwidth_h100_h200_b200'))  # shipped with the package
study['base'].update({'tp': [2], 'batch_max': 64, 'batch_points': 12, 'max_draft_len': 6})  # small grid
print([s['name'] for s in expand(load_study(study))])"""),
    new_code_cell("""out = Path(tempfile.mkdtemp(prefix='what_if_'))
summary = run_study(study, out, progress=False)
for v in summary['variants']:
    b = v['best']
    print(f"{v['variant']:>14}: best speedup x{b['speedup']:.2f} at B {b['batch']}, D {b['draft_len']}")
speedups = {v['variant']: v['best']['speedup'] for v in summary['variants']}
assert len(speedups) == 4 and all(s > 1 for s in speedups.values())"""),
    new_code_cell("""display(Markdown((out / 'summary.md').read_text()))"""),
    new_code_cell("""for name in ('frontier_variants.png', 'recommended_d.png'):
    display(Image(str(out / name)))"""),
]


def write(name: str, cells) -> None:
    """notebooks/<name> from `cells`, cell ids numbered in order (a rerun rewrites the same bytes)."""
    for i, c in enumerate(cells):
        c["id"] = f"cell-{i:02d}"
    nb = new_notebook(cells=cells, metadata={"kernelspec": {"display_name": "Python 3", "language": "python",
                                                            "name": "python3"}})
    nbformat.write(nb, ROOT / "notebooks" / name)


def main() -> None:
    """Write both notebooks (unexecuted)."""
    write("02_guidelines.ipynb", GUIDELINES)
    write("03_what_if.ipynb", WHAT_IF)


if __name__ == "__main__":
    main()
