"""The ``erstwhile`` Typer app: global options, error reporting, command registration.

To add a command group, write a module with a ``register(app)`` function and call
it at the bottom of this file.

Expected errors end the process with one line on stderr, never a traceback::

    error: erstwhile.not_found: record 'x' does not exist in namespace 'default'

Exit codes: 0 success; 2 bad usage, invalid input or a policy limit (fix the
command); 1 any other erstwhile error (not found, conflicts, providers).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from erstwhile.cli import (
    audit,
    changes,
    demo,
    embedding,
    graph,
    importing,
    maintenance,
    mcp,
    mining,
    output,
    records,
    search,
    server,
)
from erstwhile.cli.context import CliState
from erstwhile.cli.globals import share_global_options
from erstwhile.cli.options import EmbedderName, ExtractorName
from erstwhile.domain.errors import ErstwhileError, InvalidInput, PolicyLimit
from erstwhile.memory import CONFIG_ENV

USAGE_ERRORS: tuple[type[ErstwhileError], ...] = (InvalidInput, PolicyLimit)


def exit_code(error: ErstwhileError) -> int:
    return 2 if isinstance(error, USAGE_ERRORS) else 1


def _usage_error_types() -> tuple[type[Exception], type[Exception]]:
    """Click's ``UsageError`` and ``ClickException``, found through Typer's public
    ``BadParameter`` so that it does not matter whether Typer vendors Click."""
    bases = {cls.__name__: cls for cls in typer.BadParameter.__mro__}
    return bases["UsageError"], bases["ClickException"]


UsageError, ClickException = _usage_error_types()


class ErstwhileGroup(TyperGroup):
    """The root group: every error, a usage mistake included, ends as one line on
    stderr (``error: <code>: <message>``) and an exit code. Its global options are
    accepted after every command too (:mod:`erstwhile.cli.globals`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        share_global_options(self)

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except ErstwhileError as error:
            output.print_error(error)
            raise typer.Exit(exit_code(error)) from None

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **kwargs: Any,
    ) -> Any:
        kwargs.update(
            args=args,
            prog_name=prog_name,
            complete_var=complete_var,
            standalone_mode=False,
            windows_expand_args=windows_expand_args,
        )
        if not standalone_mode:
            return super().main(**kwargs)
        try:
            result = super().main(**kwargs)
        except UsageError as error:
            command = error.ctx.command_path if error.ctx else "erstwhile"  # type: ignore[attr-defined]
            text = " ".join(error.format_message().split())  # type: ignore[attr-defined]
            message = f"{text} (see {command} --help)"
            output.print_error(InvalidInput(message))
            sys.exit(2)
        except ClickException as error:
            output.print_error(InvalidInput(error.format_message()))  # type: ignore[attr-defined]
            sys.exit(error.exit_code)  # type: ignore[attr-defined]
        sys.exit(result if isinstance(result, int) else 0)


app = typer.Typer(
    name="erstwhile",
    cls=ErstwhileGroup,
    help="Long-term memory for AI agents: records that know when they were true.",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
    add_completion=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"erstwhile {_package_version()}")
        raise typer.Exit()


def _package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("erstwhile")
    except PackageNotFoundError:
        return "unknown"


@app.callback()
def root(
    ctx: typer.Context,
    db: Annotated[
        str | None,
        typer.Option(
            "--db",
            envvar="ERSTWHILE_DB",
            metavar="PATH|URL",
            help="Database file, sqlite:/// URL or postgresql:// URL "
            "(default: storage.url of the config, else erstwhile.db in the user data dir).",
            show_default=False,
        ),
    ] = None,
    config: Annotated[
        str | None,
        typer.Option(
            "--config",
            "-c",
            envvar=CONFIG_ENV,
            metavar="FILE",
            help="TOML config file (docs/server.md): its storage, embedding, extraction and "
            "namespaces tables reach every command; ERSTWHILE_* variables override it, and "
            "these options override both.",
            show_default=False,
        ),
    ] = None,
    embedder: Annotated[
        EmbedderName | None,
        typer.Option(
            "--embedder",
            envvar="ERSTWHILE_EMBEDDER",
            metavar="NAME",
            help="Embedding provider: auto (the default: the local model when installed, "
            "else hash), local, hash, openai, ollama, command, or none (lexical search "
            "only); the config's embedding table sets the rest.",
            show_default=False,
        ),
    ] = None,
    extractor: Annotated[
        ExtractorName | None,
        typer.Option(
            "--extractor",
            envvar="ERSTWHILE_EXTRACTOR",
            metavar="NAME",
            help="Extraction provider for the knowledge graph: none (the default), "
            "heuristic (in-process, deterministic), command or http (their command, URL "
            "and model come from the config's extraction table).",
            show_default=False,
        ),
    ] = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print stable machine-readable JSON instead of tables (commands "
            "that print results).",
        ),
    ] = False,
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Show the version and exit."
        ),
    ] = False,
) -> None:
    """Long-term memory for AI agents: records that know when they were true."""
    ctx.obj = CliState(db=db, config=config, embedder=embedder, extractor=extractor, json=as_json)


records.register(app)
search.register(app)
changes.register(app)
audit.register(app)
embedding.register(app)
graph.register(app)
demo.register(app)
importing.register(app)
mining.register(app)
maintenance.register(app)
mcp.register(app)
server.register(app)

__all__ = ["app", "exit_code"]
