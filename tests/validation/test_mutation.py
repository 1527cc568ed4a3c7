"""Mutation testing (issue 26): the wrapper over cosmic-ray enumerates, samples and reports deterministically, and
a small seeded sample of mutants of the adaptive simulator and SGLang policy is killed by their tests (the long run
is `python scripts/mutation.py`, docs/validation/mutation.md)."""

import pytest

import cosmic_ray  # noqa: F401  (the dev extra; no skip: CI installs it)

from specplan.validation import mutation as mu

SIM = "specplan/adaptive/simulator.py"
SGL = "specplan/adaptive/sglang_policy.py"
# CI's sample: two mutants of SGLang's adaptive rule (seed 3: the warm-up test `<=` -> `<` and the drop loop's
# `> 0` -> `> -1`), against its hand-traced tests; about a minute on a loaded 2-core machine.
CI_TESTS = {SGL: ["tests/adaptive/test_adaptive_sglang.py", "tests/adaptive/test_simulator_closed_forms.py"]}


def test_sites_are_cosmic_rays_and_the_sample_is_seeded():
    every = mu.sites(SGL)
    assert len(every) > 100
    assert len({s.key for s in every}) == len(every)
    a, b, c = mu.sample(every, 10, 1), mu.sample(every, 10, 1), mu.sample(every, 10, 2)
    assert a == b and a != c and len(a) == 10
    whole = mu.sample(every, None, 1)  # every site, in a seeded order (a prefix of a stopped run is a sample)
    assert sorted(whole, key=lambda s: s.key) == sorted(every, key=lambda s: s.key) and whole[:10] != every[:10]
    # a site's mutant changes exactly one line, and the line it names
    s = next(x for x in every if x.operator == "core/ReplaceBinaryOperator_Sub_Add")
    src = (mu.ROOT / SGL).read_text()
    mutated = mu.mutated_source(s)
    diff = [i + 1 for i, (x, y) in enumerate(zip(src.splitlines(), mutated.splitlines())) if x != y]
    assert diff == [s.line]


def test_every_module_has_related_tests_and_unknown_groups_are_refused():
    for group in mu.GROUPS:
        for m in mu.modules_of([group]):
            assert mu.tests_for(m), m
    with pytest.raises(mu.SpecplanError, match="unknown group 'nope'"):
        mu.modules_of(["nope"])


def test_report_counts_per_group_and_names_each_survivor():
    row = dict(module=SIM, operator="core/NumberReplacer", occurrence=3, line=10, before="x = 1", after="x = 2",
               seconds=1.0, tests="t")
    rows = [dict(row, outcome="killed"), dict(row, occurrence=4, outcome="survived"),
            dict(row, occurrence=5, outcome="timeout"), dict(row, module=SGL, occurrence=6, outcome="incompetent"),
            dict(row, occurrence=7, outcome="survived", now="killed", now_tests="tests/a.py"),
            dict(row, occurrence=8, outcome="no-mutation")]
    text = mu.report({"sample": 6, "seed": 1, "sites_total": 99, "groups": ["adaptive"]}, rows,
                     {f"{SIM}:core/NumberReplacer:4": "a gap: no test reads x"})
    assert "**5 run**" in text
    # adaptive: 5 mutants, killed 3 (one after a new test), 2 survived the first run, 1 killed since, 1 survives now,
    # 1 incompetent: survival rate 1 / (5 - 0 - 1) = 25 %
    assert "| adaptive | 5 | 3 | 2 | 1 | 0 | 0 | 1 | 1 | 25 % |" in text
    assert f"| `{SIM}` | 4 | 3 | 2 | 1 | 0 | 0 | 1 | 0 | 25 % |" in text
    assert f"| {SIM}:10 | `x = 1` → `x = 2` | survives: a gap: no test reads x |" in text
    assert "killed now by tests/a.py" in text


def test_a_seeded_sample_of_sglang_policy_mutants_is_killed():
    """CI's small sample (the long mode, scripts/mutation.py, samples 300): every mutant is killed or a listed
    equivalent."""
    meta, rows = mu.run([], 2, 3, modules=[SGL], tests=CI_TESTS, log=lambda *_: None)
    ran = [r for r in rows if r["outcome"] != "no-mutation"]
    assert [r["line"] for r in ran] == [147, 131]  # `while current_idx > 0:`, `if self._batch_count <= ...`
    left = [r for r in ran if r["outcome"] == "survived" and not mu.equivalence(r)]
    assert not left, left


def test_the_equivalence_registry_is_keyed_on_the_line_before_and_after():
    """Issue 44: an entry names the mutated line before and after, so another mutation of the same line is not
    accepted unseen; each entry's line is in today's code (a stale entry is noticed) and carries its argument."""
    key, eq = next((k, v) for k, v in mu.EQUIVALENT.items() if k[0].endswith("acceptance.py") and "at_depth" in k[1])
    row = dict(module=key[0], operator="core/NumberReplacer", occurrence=0, line=1, before=key[1], after=key[2],
               outcome="survived", seconds=1.0, tests="t")
    assert mu.equivalence(row) is eq
    other = dict(row, after=key[1].replace("range(1, depth + 1)", "range( 0, depth + 1)"))  # killed by its tests
    assert other["after"] != key[1] and mu.equivalence(other) is None
    for (module, before, after), e in mu.EQUIVALENT.items():
        lines = {x.strip() for x in (mu.ROOT / module).read_text(encoding="utf-8").splitlines()}
        assert before in lines and before != after, (module, before)
        assert e.why and (e.tolerance is None or e.tolerance.strip())
    text = mu.report({"sample": 2, "seed": 1, "sites_total": 9, "groups": ["speculation"]},
                     [row, dict(row, occurrence=1, before="if al >= 1.0 + at_d - 1e-12:",
                                after="if al >= 1.0 + at_d / 1e-12:")])
    assert "equivalent within tolerance (alpha within 2^-100 of 1)" in text
    assert "| speculation | 2 | 0 | 2 | 0 | 1 | 1 | 0 | 0 | – |" in text


def test_a_recorded_mutant_on_a_line_that_stands_twice_is_found_on_its_own_line():
    """serving/aggregated.py has `others = ... - 1.0, 0.0)` twice (the OSL-1 path and the TTFT quantile's wait):
    a survivor recorded on the second, under an occurrence index the code has since shifted, is rechecked on the
    twin nearest its recorded line, not on the first that makes the same text change."""
    mod = "specplan/serving/aggregated.py"
    before = ("others = None if wl.concurrency is None else np.maximum(np.asarray(wl.concurrency, dtype=float) - 1.0, "
              "0.0)")
    after = before.replace("- 1.0, 0.0)", "- 0.0, 0.0)")
    text = (mu.ROOT / mod).read_text(encoding="utf-8")
    lines = [i + 1 for i, x in enumerate(text.splitlines()) if x.strip() == before]
    assert len(lines) == 2
    twins = [s for s in mu.sites(mod) if s.operator == "core/NumberReplacer" and s.line in lines
             and mu.changed_line(text, mu.mutated_source(s)) == (before, after)]
    assert sorted(s.line for s in twins) == lines
    first = min(twins, key=lambda s: s.line)  # recorded as the first's occurrence index, near the second's line
    got = mu.relocate(mu.Site(mod, first.operator, first.occurrence, lines[1] - 3), before, after)
    assert got.line == lines[1]


def test_a_sample_drawn_at_a_revision_is_that_revisions_sample():
    """sample_at draws the seeded sample from the code at a git revision (a resumed run's own), with each mutant's
    line before and after there: at HEAD, for a module the tree has not changed, it is today's sample."""
    every, picked, change = mu.sample_at([SGL], 5, 1, "HEAD")
    assert sorted(s.key for s in every) == sorted(s.key for s in mu.sites(SGL))
    assert picked == mu.sample(mu.sites(SGL), 5, 1)
    src = (mu.ROOT / SGL).read_text(encoding="utf-8")
    for s in picked:
        assert change[s.key] == mu.changed_line(src, mu.mutated_source(s))
