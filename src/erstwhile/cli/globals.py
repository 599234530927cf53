"""Global options where users type them: before the command or after it.

``erstwhile --db x.db search car`` and ``erstwhile search car --db x.db`` are the same
call, and so is ``erstwhile token list --config f.toml``. The root group defines the
global options; :func:`share_global_options` gives every command and group under it
a copy of each (listed under "Global options" in its help) that, when given there,
sets the same field of the root's :class:`~erstwhile.cli.context.CliState` — the
later one wins. A command's own option of the same name keeps its meaning there
(``demo --db`` is the demo's database); a command's own ``--json`` also honours the
global one (:data:`erstwhile.cli.options.JsonOutput`).
"""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperOption

from erstwhile.cli.context import cli_state

#: The root's parameters every command shares (by their Python names).
GLOBAL = ("db", "config", "embedder", "extractor", "as_json")
PANEL = "Global options"
_PREFIX = "global_"


def _state_field(name: str) -> str:
    return "json" if name == "as_json" else name


# Typer vendors its own Click: commands, groups and parameters are typed loosely here
# and told apart by what they have (a group has ``commands``).
Command = Any


def _remember(ctx: typer.Context, param: TyperOption, value: Any) -> None:
    """Sets the state field of a global option given after the command."""
    if value is None or value is False:  # not given here
        return
    assert param.name is not None
    setattr(cli_state(ctx), _state_field(param.name.removeprefix(_PREFIX)), value)


def _taken(command: Command) -> set[str]:
    return {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)}


def _copy(option: TyperOption, decls: list[str]) -> TyperOption:
    assert option.name is not None
    return TyperOption(
        param_decls=[_PREFIX + option.name, *decls],
        type=None if option.is_flag else option.type,
        is_flag=option.is_flag or None,
        default=None,
        callback=_remember,
        expose_value=False,
        metavar=option.metavar,
        help=option.help,
        show_default=False,
        rich_help_panel=PANEL,
    )


def _share(command: Command, options: list[TyperOption]) -> None:
    taken = _taken(command)
    names = {param.name for param in command.params}
    for option in options:
        if _PREFIX + str(option.name) in names:
            continue  # shared already
        decls = [opt for opt in option.opts if opt not in taken]
        if decls:
            command.params.append(_copy(option, decls))
    for sub in getattr(command, "commands", {}).values():
        _share(sub, options)


def share_global_options(root: Command) -> None:
    """Gives every command under ``root`` the root's global options."""
    options = [p for p in root.params if isinstance(p, TyperOption) and p.name in GLOBAL]
    for command in root.commands.values():
        _share(command, options)
