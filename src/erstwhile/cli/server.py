"""Server commands: ``serve`` runs the REST API and the gRPC service; ``token
create|list|disable`` manage who may call them.

    erstwhile serve [--config FILE] [--host H] [--port P] [--grpc-port G] [--workers N]
                    [--no-auth]
    erstwhile token create [--read-only | --admin] [--namespace NS]... [--name NAME]
    erstwhile token list
    erstwhile token disable ID

The database is ``--db`` (or ``ERSTWHILE_DB``) when given, else ``storage.url`` from
the config file, else the user data file. Auth is on by default: create a token
first. ``--no-auth`` is refused unless the server binds a loopback address.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer
from rich import box
from rich.table import Table

from erstwhile.cli import output
from erstwhile.cli.context import settings as configured_settings
from erstwhile.cli.options import JsonOutput
from erstwhile.domain.auth import Token
from erstwhile.domain.time import format_instant
from erstwhile.memory import MAX_WORKERS, Memory

# the config module (pydantic-settings, asyncio) is imported by the commands that read
# a config, not by every CLI call
if TYPE_CHECKING:
    from erstwhile.config import Settings

LogLevel = Literal["debug", "info", "warning", "error"]

token_app = typer.Typer(
    name="token",
    help="Create, list and disable the tokens that let callers reach the server.",
    no_args_is_help=True,
)


def _open_store(settings: Settings) -> Memory:
    from erstwhile.config import open_store_only

    return open_store_only(settings)


def serve(
    ctx: typer.Context,
    host: Annotated[
        str | None,
        typer.Option("--host", metavar="HOST", help="Address to bind (default 127.0.0.1)."),
    ] = None,
    port: Annotated[
        int | None,
        typer.Option(
            "--port",
            "-p",
            metavar="PORT",
            min=1,
            max=65535,
            help="Port to listen on (default 7077).",
        ),
    ] = None,
    grpc_port: Annotated[
        int | None,
        typer.Option(
            "--grpc-port",
            metavar="PORT",
            min=0,
            max=65535,
            help="gRPC port (default 7078; 0 turns gRPC off).",
        ),
    ] = None,
    no_auth: Annotated[
        bool,
        typer.Option(
            "--no-auth", help="Serve without tokens; refused unless HOST is a loopback address."
        ),
    ] = False,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers",
            "-w",
            metavar="N",
            min=1,
            max=MAX_WORKERS,
            help="Server processes sharing the database and ports (default 1; about one per core).",
        ),
    ] = None,
    log_level: Annotated[
        LogLevel,
        typer.Option("--log-level", metavar="LEVEL", help="debug, info, warning or error."),
    ] = "info",
) -> None:
    """Serve the REST API (OpenAPI at /openapi.json, metrics at /metrics) and, beside it
    on one service, the gRPC service erstwhile.semantic.v1.Semantic."""
    server: dict[str, Any] = {}
    if host is not None:
        server["host"] = host
    if port is not None:
        server["port"] = port
    if grpc_port is not None:
        server["grpc_port"] = grpc_port
    if workers is not None:
        server["workers"] = workers
    overrides: dict[str, Any] = {"server": server} if server else {}
    if no_auth:
        overrides["auth"] = {"enabled": False}
    settings = configured_settings(ctx, overrides)
    settings.check_exposure()
    from erstwhile.cli.serving import serve as run_server  # uvicorn: only when serving

    run_server(settings, log_level)


def _token_json(token: Token) -> dict[str, Any]:
    return {
        "id": token.id,
        "name": token.name,
        "capabilities": sorted(c.value for c in token.capabilities),
        "namespaces": sorted(token.namespaces),
        "disabled": token.disabled,
        "created_at": format_instant(token.created_at),
    }


@token_app.command("create")
def token_create(
    ctx: typer.Context,
    read_only: Annotated[
        bool, typer.Option("--read-only", help="Only read (search, get, history).")
    ] = False,
    admin: Annotated[
        bool, typer.Option("--admin", help="Also verify, hard-delete by expire, run jobs.")
    ] = False,
    namespaces: Annotated[
        list[str] | None,
        typer.Option(
            "--namespace",
            "-n",
            metavar="NS",
            help="Limit the token to this namespace; repeat for more (default: all).",
        ),
    ] = None,
    name: Annotated[
        str | None, typer.Option("--name", metavar="NAME", help="A label for people.")
    ] = None,
    as_json: JsonOutput = False,
) -> None:
    """Create a token and print its secret, once: it is stored only hashed."""

    with _open_store(configured_settings(ctx)) as memory:
        token, secret = memory.service.access.create_token(
            name=name, read_only=read_only, admin=admin, namespaces=namespaces or ()
        )
    if as_json:
        output.print_json({**_token_json(token), "token": secret})
        return
    typer.echo(secret)
    scope = ", ".join(sorted(token.namespaces)) or "every namespace"
    caps = ", ".join(sorted(c.value for c in token.capabilities))
    output.print_note(
        f"created {token.id} ({caps}; {scope}). The secret above is shown only now: "
        "keep it; send it as 'Authorization: Bearer <token>'."
    )


@token_app.command("list")
def token_list(ctx: typer.Context, as_json: JsonOutput = False) -> None:
    """List tokens (never their secrets)."""

    with _open_store(configured_settings(ctx)) as memory:
        tokens = memory.service.access.tokens()
    if as_json:
        output.print_json([_token_json(token) for token in tokens])
        return
    table = Table(box=box.SIMPLE_HEAD)
    for column in ("id", "name", "capabilities", "namespaces", "state", "created"):
        table.add_column(column)
    for token in tokens:
        data = _token_json(token)
        table.add_row(
            token.id,
            token.name,
            ", ".join(data["capabilities"]),
            ", ".join(data["namespaces"]) or "all",
            "disabled" if token.disabled else "active",
            data["created_at"][:19].replace("T", " "),
        )
    output.console().print(table)


@token_app.command("disable")
def token_disable(
    ctx: typer.Context,
    token_id: Annotated[str, typer.Argument(metavar="ID", help="Token id (tok_…).")],
) -> None:
    """Disable a token: requests with it get 401 from now on."""

    with _open_store(configured_settings(ctx)) as memory:
        memory.service.access.disable(token_id)
    output.print_note(f"disabled {token_id}")


def register(app: typer.Typer) -> None:
    app.command(rich_help_panel="Server")(serve)
    app.add_typer(token_app, rich_help_panel="Server")
