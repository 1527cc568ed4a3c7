"""The typer application object shared by every command module."""

import typer

app = typer.Typer(
    name="specplan",
    help="Plan speculative decoding: roofline costs, speedup, Pareto frontiers, recommendations.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode=None,  # plain help: brackets in help texts survive, flags show no <bool> metavar
)
profiles_app = typer.Typer(help="List and show built-in hardware and model profiles.", no_args_is_help=True,
                           rich_markup_mode=None)
model_app = typer.Typer(help="Model profile tools (import a Hugging Face config).", no_args_is_help=True,
                        rich_markup_mode=None)
app.add_typer(profiles_app, name="profiles")
app.add_typer(model_app, name="model")
