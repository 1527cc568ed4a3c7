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


def _blas_threads_of_a_run(env_value):
    """OPENBLAS_NUM_THREADS as the program sees it after start-up (None: unset), whether numpy was imported, and
    the process's thread count (Linux /proc; OpenBLAS starts its threads at numpy's import)."""
    import os

    code = ("import sys, os, runpy; sys.argv = ['specplan', 'profiles', 'list']\n"
            "try:\n    runpy.run_module('specplan', run_name='__main__', alter_sys=True)\n"
            "except SystemExit:\n    pass\n"
            "threads = [ln for ln in open('/proc/self/status') if ln.startswith('Threads:')]\n"
            "n = int(threads[0].split()[1]) if threads else None\n"
            "print(repr((os.environ.get('OPENBLAS_NUM_THREADS'), 'numpy' in sys.modules, n)))")
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if env_value is not None:
        env["OPENBLAS_NUM_THREADS"] = env_value
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    return eval(r.stdout.strip().splitlines()[-1])


def test_a_program_run_starts_one_blas_thread_unless_the_user_says():
    """A run of the program asks OpenBLAS for one thread (set before numpy's import); a value the user set stays;
    a library import of the CLI leaves the environment alone."""
    ours, users = _blas_threads_of_a_run(None), _blas_threads_of_a_run("3")
    assert ours[:2] == ("1", True) and users[:2] == ("3", True)
    import os

    if ours[2] is not None and len(os.sched_getaffinity(0)) > 1:  # Linux, 2+ cores: OpenBLAS read it at import
        assert ours[2] == 1 and users[2] > ours[2], (ours, users)  # (OpenBLAS caps its threads at the cores)
    code = "import os, specplan.cli; print(repr(os.environ.get('OPENBLAS_NUM_THREADS')))"
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0 and r.stdout.strip() == "None", (r.stdout, r.stderr)
