"""Entry point: the `flowforge` command line."""


def _quiet_flag_types() -> None:
    """Typer 0.2x prints `<bool>` beside every on/off flag in `--help`, as if
    `--json` took a value; flags take none, so they show no type at all."""
    try:
        from typer.core import TyperOption
    except ImportError:          # pragma: no cover - another typer layout
        return
    shown = TyperOption.display_type_rich

    def display_type_rich(self, ctx):  # type: ignore[no-untyped-def]
        return None if getattr(self, "is_flag", False) else shown(self, ctx)

    TyperOption.display_type_rich = display_type_rich


_quiet_flag_types()
