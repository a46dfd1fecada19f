"""What one sandboxed run may consume. Defaults suit a small data-shaping
block; a block definition may lower them or raise them up to the caps.

`memory_mb` is everything the block may hold: in the bubblewrap confinement
its scratch folder is a tmpfs (RAM), so the folder's share (`scratch_mb`:
its size plus ~1 KB of kernel memory for each file it may hold) is taken
out of the address space the block may map (`address_space_mb`); a block
cannot park memory in files beyond its limit.  The plain-process
confinement has no scratch folder (it may open no file), so the whole limit
is address space there."""

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
    """All the block may hold: its address space (RLIMIT_AS; allocations past
    it raise MemoryError) and, under bubblewrap, its scratch folder."""
    output_bytes: int = 1_000_000
    """Size of the JSON result (and of captured prints)."""
    file_mb: int = 16
    """Largest file the block may write in its scratch folder, and the folder's
    size (at most a quarter of memory_mb, which the folder counts against)."""

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"sandbox limit {name} must be a positive number, not "
                                 f"{value!r}")

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def scratch_mb(self) -> int:
        """The scratch folder's share of memory_mb: file_mb, at most a quarter."""
        return max(1, min(int(self.file_mb), int(self.memory_mb) // 4))

    @property
    def scratch_files(self) -> int:
        """How many files and folders the scratch folder holds: 64 per MB.  Each
        costs the kernel ~1 KB outside the folder's size (an unbounded count
        held 400 MB in a 16 MB folder), so that share is reserved for them."""
        return self.scratch_mb * 64

    @property
    def scratch_bytes(self) -> int:
        """The tmpfs size: scratch_mb less 1 KB per file it may hold."""
        return self.scratch_mb * 1024 * 1024 - self.scratch_files * 1024

    def address_space_mb(self, scratch: bool) -> int:
        """RLIMIT_AS for the block: memory_mb less the scratch folder, if it has one."""
        return int(self.memory_mb) - (self.scratch_mb if scratch else 0)

    def capped(self) -> Limits:
        """These limits, none above MAX_LIMITS."""
        return Limits(**{k: min(v, getattr(MAX_LIMITS, k)) for k, v in asdict(self).items()})


MAX_LIMITS = Limits(cpu_seconds=30, wall_seconds=120.0, memory_mb=2048,
                    output_bytes=20_000_000, file_mb=256)
