"""How many runs each user has in progress on this server, and the cap.

One user's 500 accepted runs of 28 hours would otherwise hold the server's
loop, database and workers for everyone.  A slot is claimed before a run
starts (no await in between, so concurrent requests cannot both take the
last one), bound to the run's id once it has one, and freed when its task
ends - a run that stops `waiting` for a person or a time frees its slot.
"""

from __future__ import annotations

from collections import Counter

from flowforge.server.errors import ApiError

__all__ = ["RunSlots"]


class RunSlots:
    def __init__(self, limit: int) -> None:
        self.limit = limit                       # 0: no cap
        self.in_progress: Counter[str] = Counter()
        self.owner_of: dict[str, str] = {}

    def check(self, user: dict) -> None:
        """Answer 429 now if `user` has no slot left: before any work on the
        request (loading, compiling), so a refused flood costs little."""
        self._refuse_if_full(user)

    def claim(self, user: dict) -> str:
        """Take a slot for `user` (a user row) or answer 429; the user id."""
        self._refuse_if_full(user)
        owner = user["user_id"]
        self.in_progress[owner] += 1
        return owner

    def _refuse_if_full(self, user: dict) -> None:
        owner = user["user_id"]
        if self.limit and self.in_progress[owner] >= self.limit:
            raise ApiError(429, f"user '{user['name']}' already has {self.limit} runs in "
                                f"progress, this server's limit (FLOWFORGE_MAX_USER_RUNS, "
                                f"`flowforge serve --max-user-runs`): wait for one to end "
                                f"or cancel one", code="too_many_runs",
                           headers={"Retry-After": "5"})

    def bind(self, run_id: str, owner: str) -> None:
        self.owner_of[run_id] = owner

    def free(self, owner: str) -> None:
        """Give back a claimed slot (a start that failed, a run that ended)."""
        left = self.in_progress[owner] - 1
        if left > 0:
            self.in_progress[owner] = left
        else:
            self.in_progress.pop(owner, None)

    def ended(self, run_id: str) -> None:
        owner = self.owner_of.pop(run_id, None)
        if owner is not None:
            self.free(owner)
