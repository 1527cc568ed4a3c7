"""The `specplan` program imports only the module of the command it runs (specplan.cli.MODULE_OF): the map names,
for every command and group the full CLI registers, the module that registers it, and a run of one command
answers as the full CLI does."""

import subprocess
import sys

from specplan import cli


def _module_of(group) -> str:
    """The specplan.cli module that registered the commands of a typer group."""
    mods = {c.callback.__module__ for c in group.typer_instance.registered_commands}
    assert len(mods) == 1, mods
    return mods.pop()


def test_every_command_is_mapped_to_the_module_that_registers_it():
    seen = {}
    for c in cli.app.registered_commands:
        seen[c.name] = c.callback.__module__
    for g in cli.app.registered_groups:
        seen[g.name] = _module_of(g)
    assert seen, "no command registered"
    mapped = {k: f"specplan.cli.{v}" for k, v in cli.MODULE_OF.items()}
    missing = {k: v for k, v in seen.items() if k not in mapped}
    assert not missing, f"add these commands to specplan.cli.MODULE_OF (a run of one imports every module): {missing}"
    assert mapped == seen
    assert set(cli.MODULE_OF.values()) <= set(cli.COMMAND_MODULES)


def test_a_program_run_imports_only_its_commands_module():
    code = ("import sys, runpy; sys.argv = ['specplan', 'step', '--help']\n"
            "try:\n    runpy.run_module('specplan', run_name='__main__', alter_sys=True)\n"
            "except SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.startswith('specplan.cli.')))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    loaded = eval(r.stdout.strip().splitlines()[-1])
    assert "specplan.cli.step_cmd" in loaded
    assert not {f"specplan.cli.{m}" for m in cli.COMMAND_MODULES if m != "step_cmd"} & set(loaded), loaded
    assert "specplan step [OPTIONS]" in r.stdout
