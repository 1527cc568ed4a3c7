"""`specplan profiles list|show` and `specplan model import`."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from specplan.cli.app import model_app, profiles_app
from specplan.cli.output import print_json, table


@profiles_app.command("list")
def profiles_list(
    json_out: bool = typer.Option(False, "--json", help="Print JSON instead of tables."),
    model: Optional[str] = typer.Option(None, "--model", "-m", help="Only the per-dataset acceptance profiles of "
                                        "this model id."),
    dataset: Optional[str] = typer.Option(None, "--dataset", help="Only the per-dataset acceptance profiles of this "
                                          "dataset or class (humaneval, code, chat, ...)."),
    mechanism: Optional[str] = typer.Option(None, "--mechanism", help="Only the per-dataset acceptance profiles of "
                                            "this mechanism."),
) -> None:
    """List built-in profiles: hardware, models, acceptance (mechanism, model, dataset, source) and engines; with
    --model / --dataset / --mechanism the per-dataset acceptance profiles from published tables."""
    from specplan.api import profiles_table

    if model is not None or dataset is not None or mechanism is not None:
        from specplan.speculation.datasets import profile_rows

        rows = profile_rows(model, dataset, mechanism)
        if json_out:
            print_json(rows)
            return
        print(f"Acceptance profiles per dataset ({len(rows)}; --acceptance MECH=ID, or --dataset NAME|CLASS)")
        if rows:
            header = [k for k in rows[0] if k not in ("rows", "source")]
            print(table([[r[k] for k in header] for r in rows], header))
        return
    data = profiles_table()
    if json_out:
        print_json(data)
        return
    for title, rows in (("Hardware", data["hardware"]), ("Models", data["models"]),
                        ("Acceptance profiles (--acceptance MECH=ID; default: used when none is given)",
                         data["acceptance"]),
                        ("Engine profiles (--engine ID)", data["engines"])):
        print(f"{title} ({len(rows)})")
        if rows:
            header = list(rows[0])
            print(table([[r[k] for k in header] for r in rows], header))
        print()


@profiles_app.command("show")
def profiles_show(ref: str = typer.Argument(..., metavar="ID", help="A built-in id or a path to a profile YAML.")) -> None:
    """Print one hardware or model profile as YAML."""
    from specplan.core.errors import SpecplanError
    from specplan.profiles.registry import hardware_ids, load_hardware, load_model, model_ids, write_profile_yaml

    if ref in hardware_ids():
        print(write_profile_yaml(load_hardware(ref)), end="")
    elif ref in model_ids():
        _print_model(load_model(ref))
    elif Path(ref).is_file():
        from specplan.profiles.registry import read_yaml

        data = read_yaml(Path(ref))
        if "peak_flops" in data:
            print(write_profile_yaml(load_hardware(ref)), end="")
        else:
            _print_model(load_model(ref))
    else:
        import difflib

        ids = hardware_ids() + model_ids()
        close = difflib.get_close_matches(ref, ids, n=1, cutoff=0.4)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        raise SpecplanError(f"ID: unknown profile id '{ref}' (neither a built-in id nor a YAML file){hint}")


def _print_model(model) -> None:
    """A model profile as YAML, followed by its derived parameter counts as YAML comments."""
    from specplan.profiles.params import param_summary
    from specplan.profiles.registry import write_profile_yaml

    print(write_profile_yaml(model), end="")
    print("\n".join(param_summary(model)))


@model_app.command("import")
def model_import(
    config: Path = typer.Argument(..., help="A Hugging Face config.json."),
    out: Optional[Path] = typer.Option(None, "-o", "--out", "--output", help="Write the profile YAML here."),
) -> None:
    """Import a Hugging Face config.json (nested text_config too) into a model profile YAML."""
    from specplan.profiles.hf_import import import_hf_config
    from specplan.profiles.params import param_summary
    from specplan.profiles.registry import write_profile_yaml

    if out is not None:
        from specplan.core.io import check_output_file

        check_output_file(out)
    profile = import_hf_config(config)
    text = write_profile_yaml(profile, out)
    if out is None:
        print(text, end="")
    else:
        print(f"wrote {out}")
    print("\n".join(param_summary(profile)))
