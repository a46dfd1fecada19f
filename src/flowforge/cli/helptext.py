"""Help pages that read the same at any width, on a terminal or in a pipe.

The help is click's plain layout (the app sets `rich_markup_mode=None`): it
wraps every line at the width it is given and never cuts an option's name or
its text, where the boxed tables shrank columns to `--allow-private-w…` at 80
columns.  Click shortens each command's line in a group's list to what fits
beside it ("Show a stored run: every block's..."); here each command's line is
its docstring's first paragraph, whole, on one logical line (the docstring's
own line breaks do not leak), wrapped like any other text.

Usage lines name arguments the way every other tool's help does, `FILE`,
`[RUN_ID]`, `PATHS...`, where typer writes a required one as `{file}`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:          # typer's commands are click's; importing click costs a command ~10 ms
    import click

__all__ = ["whole_short_help", "plain_usage"]


def whole_short_help(command: click.Command) -> click.Command:
    """Give every command of the tree its first paragraph as its short help."""
    for sub in getattr(command, "commands", {}).values():
        whole_short_help(sub)
    if not command.short_help and command.help:
        first = command.help.strip().split("\n\n")[0]
        command.short_help = " ".join(first.split())
    return command


def _usage_name(argument: click.Argument) -> str:
    """`FILE`, `[FILE]` when optional, `PATHS...` when it takes several (a
    metavar the command gives is its own spelling, kept)."""
    name = argument.metavar or (argument.name or "").upper()
    if not argument.required and not name.startswith("["):
        name = f"[{name}]"
    return name + ("..." if argument.nargs != 1 else "")


def plain_usage(command: click.Command) -> click.Command:
    """Give every argument of the tree the conventional usage name: typer's
    argument class has no option for it, so each argument's `get_usage_pieces`
    (what the usage line asks of it) is replaced on the instance."""
    for sub in getattr(command, "commands", {}).values():
        plain_usage(sub)
    for param in command.params:
        if param.param_type_name == "argument":
            param.get_usage_pieces = (lambda ctx, _arg=param: [_usage_name(_arg)])  # type: ignore[method-assign]
    return command
