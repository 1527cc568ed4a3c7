"""specplan bench-speed (specplan.bench.speed): its commands are real command lines of the CLI, a run measures a
child's CPU seconds, and the report lands between docs/performance.md's markers (not a timed test: no speed is
asserted)."""

import math

import typer.main

from specplan.bench import speed
from specplan.cli import app


def test_every_benchmarked_command_line_parses():
    group = typer.main.get_command(app)
    for c in speed.COMMANDS:
        cmd = group.commands[c.argv[0]]
        opts = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)}
        given = [a for a in c.argv if a.startswith("-")]
        assert set(given) <= opts, (c.name, set(given) - opts)


def test_a_run_is_timed_in_a_child_and_the_table_names_its_ratio():
    cmd = speed.Command("profiles list", ("profiles", "list"), "none")
    cpu, wall, out = speed.run_once(cmd, timeout_s=120)
    assert cpu > 0 and wall > 0 and "Hardware (" in out
    t = speed.Timing(cmd, 0.5, 0.75)
    text = speed.table([t, speed.Timing(cmd, math.nan, math.nan, failed="over 5 s")], ref_s=0.25)
    assert "| profiles list | 0.50 | 0.75 | 2.0 | none |  |" in text  # 0.5 CPU s / 0.25 s reference
    assert "| profiles list | – | – | – | none | over 5 s |" in text
    pareto = speed.Timing(speed.COMMANDS[1], 1.0, 1.2, work_s=0.5)
    assert "541k points/s" in speed.table([pareto], 1.0)  # 270,480 points / 0.5 s


def test_the_report_replaces_only_the_generated_part(tmp_path):
    doc = tmp_path / "performance.md"
    doc.write_text(f"# Performance\n\nprose\n\n{speed.BEGIN}\nold\n{speed.END}\n\nmore prose\n")
    speed.write_doc("new table", doc)
    assert doc.read_text() == f"# Performance\n\nprose\n\n{speed.BEGIN}\nnew table\n{speed.END}\n\nmore prose\n"
    fresh = tmp_path / "fresh.md"
    speed.write_doc("t", fresh)
    assert fresh.read_text() == f"# Performance\n\n{speed.BEGIN}\nt\n{speed.END}\n"
