"""What one sandboxed run may consume. Defaults suit a small data-shaping
block; a block definition may lower them or raise them up to the caps."""

from __future__ import annotations

from dataclasses import asdict, dataclass

__all__ = ["Limits", "MAX_LIMITS"]


@dataclass(frozen=True)
class Limits:
    cpu_seconds: int = 2
    """CPU time (RLIMIT_CPU); the kernel stops the process past it."""
    wall_seconds: float = 10.0
    """Real time, counted by the parent, which kills the process group past it."""
    memory_mb: int = 256
    """Address space (RLIMIT_AS); allocations past it raise MemoryError."""
    output_bytes: int = 1_000_000
    """Size of the JSON result (and of captured prints)."""
    file_mb: int = 16
    """Largest file the block may write in its scratch directory."""

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"sandbox limit {name} must be a positive number, not "
                                 f"{value!r}")

    def to_dict(self) -> dict:
        return asdict(self)

    def capped(self) -> Limits:
        """These limits, none above MAX_LIMITS."""
        return Limits(**{k: min(v, getattr(MAX_LIMITS, k)) for k, v in asdict(self).items()})


MAX_LIMITS = Limits(cpu_seconds=30, wall_seconds=120.0, memory_mb=2048,
                    output_bytes=20_000_000, file_mb=256)
