"""One meaning per exit code, for every subcommand:

    0  done (the run succeeded)
    1  the run failed or was cancelled, something asked for does not exist,
       or the database could not be reached
    2  invalid input or usage: a bad document or value, a name already taken

Commands map flowforge's errors through `exit_code` instead of choosing a
number each, so `runs show` and `blocks show` answer "not found" alike."""

from __future__ import annotations

from flowforge.errors import NotFound, RunError, StorageError
from flowforge.storage.base import AlreadyExists

__all__ = ["SUCCESS", "FAILED", "INVALID", "exit_code"]

SUCCESS, FAILED, INVALID = 0, 1, 2


def exit_code(exc: BaseException) -> int:
    """1 for a failure while doing (a run, the database) or a missing thing;
    2 for everything a user wrote wrong (documents, values, names, files)."""
    if isinstance(exc, AlreadyExists):
        return INVALID
    if isinstance(exc, (NotFound, RunError, StorageError)):
        return FAILED
    return INVALID
