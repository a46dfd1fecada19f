"""Help pages that read the same at any width, on a terminal or in a pipe.

The help is click's plain layout (the app sets `rich_markup_mode=None`): it
wraps every line at the width it is given and never cuts an option's name or
its text, where the boxed tables shrank columns to `--allow-private-w…` at 80
columns.  Click shortens each command's line in a group's list to what fits
beside it ("Show a stored run: every block's..."); here each command's line is
its docstring's first paragraph, whole, on one logical line (the docstring's
own line breaks do not leak), wrapped like any other text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:          # typer's commands are click's; importing click costs a command ~10 ms
    import click

__all__ = ["whole_short_help"]


def whole_short_help(command: click.Command) -> click.Command:
    """Give every command of the tree its first paragraph as its short help."""
    for sub in getattr(command, "commands", {}).values():
        whole_short_help(sub)
    if not command.short_help and command.help:
        first = command.help.strip().split("\n\n")[0]
        command.short_help = " ".join(first.split())
    return command
