"""Flags users bring from the serving engines (vLLM, SGLang, TensorRT-LLM) answered with one line naming ours.

`-tp 2` would otherwise read as our `-t` plus garbage, and `--max-num-seqs` as an unknown option with no hint.
`foreign_flag_error(argv, command)` looks at the raw arguments before the command line is parsed.
"""

from __future__ import annotations

# engine flag -> (what it means, our options that say it, best first); each command names those it has
FOREIGN = {
    "-tp": ("tensor parallelism", ("--tp", "--layouts")),
    "--tensor-parallel-size": ("tensor parallelism", ("--tp", "--layouts")),
    "--tp-size": ("tensor parallelism", ("--tp", "--layouts")),
    "--num-speculative-tokens": ("the draft length", ("--draft-len", "--max-draft-len", "--policies")),
    "--speculative-num-steps": ("the draft length", ("--draft-len", "--max-draft-len", "--policies")),
    "--max-num-seqs": ("the batch (sequences decoded together)", ("--batch", "--batch-max", "--max-running",
                                                                  "--concurrency")),
}


def _options_of(command) -> set[str]:
    """Every option spelling of a click command."""
    return {o for p in getattr(command, "params", []) for o in (*p.opts, *getattr(p, "secondary_opts", []))}


def _subcommand(group, argv: list[str]):
    """The click command `argv` names (following nested groups), or None."""
    cmd, name = group, "specplan"
    for tok in argv:
        if not hasattr(cmd, "commands"):  # a group (click's or typer's vendored copy) has sub-commands
            break
        sub = cmd.commands.get(tok)
        if sub is None:
            break
        cmd, name = sub, f"{name} {tok}"
    return (cmd, name) if cmd is not group else (None, None)


def foreign_flag_error(argv: list[str], get_group) -> str | None:
    """One line for the first engine flag in `argv` (before `--`), naming this command's equivalents; else None.
    get_group: a function returning the click group (called only when an engine flag is found)."""
    for tok in argv:
        if tok == "--":
            return None
        flag = tok.split("=", 1)[0]
        if flag not in FOREIGN:
            continue
        what, ours = FOREIGN[flag]
        cmd, name = _subcommand(get_group(), argv)
        have = _options_of(cmd) if cmd is not None else set()
        mine = [o for o in ours if o in have]
        where = f"{name}: " if cmd is not None else ""
        return (f"{where}{flag} is an engine flag; specplan sets {what} with {' or '.join(mine or ours)}"
                + ("" if mine else " (on predict, recommend, pareto or adaptive; see specplan COMMAND --help)"))
    return None
