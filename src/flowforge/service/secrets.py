"""Per-user secrets: stored encrypted, readable only by that user's runs.

A secret reaches a run as `{{secrets.NAME}}` and, for model providers, under
its own name (a secret called `OPENAI_API_KEY` is that user's OpenAI key).
No API returns a value; every value a run loaded is redacted (`***`) from
what the run records, returns, streams and posts.

Values are encrypted with Fernet (AES-128-CBC + HMAC-SHA256, from the
`cryptography` package) before they reach the storage.  The key:
`FLOWFORGE_SECRET_KEY` (one or more Fernet keys, comma-separated: the first
encrypts, all decrypt, so keys can be rotated), else the key file named by
`FLOWFORGE_SECRET_KEY_FILE`, else `secret.key` in the user data folder, made
(mode 0600) on first use.  Servers sharing one PostgreSQL database must share
the key: set `FLOWFORGE_SECRET_KEY` on each.
"""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path
from typing import Any

from flowforge.errors import FlowforgeError, InvalidValue, NotFound
from flowforge.storage.base import Storage

__all__ = ["SecretBox", "SecretKeyError", "secret_box", "set_secret", "list_secrets",
           "delete_secret", "load_secrets", "check_secret_name", "MAX_SECRET_BYTES"]

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
MAX_SECRET_BYTES = 64 * 1024


class SecretKeyError(FlowforgeError):
    """The encryption key is missing, malformed, or not the one the values were stored with."""


class SecretBox:
    """Encrypts and decrypts secret values with the server's key(s)."""

    def __init__(self, keys: list[bytes]) -> None:
        from cryptography.fernet import Fernet, MultiFernet

        try:
            self._fernet = MultiFernet([Fernet(key) for key in keys])
        except (ValueError, TypeError) as exc:
            raise SecretKeyError(
                f"the secret key is not a Fernet key ({exc}): make one with `python -c "
                f"\"from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())\"`"
            ) from None

    def encrypt(self, value: str) -> str:
        return self._fernet.encrypt(value.encode("utf-8")).decode("ascii")

    def decrypt(self, token: str, name: str = "") -> str:
        from cryptography.fernet import InvalidToken

        try:
            return self._fernet.decrypt(token.encode("ascii")).decode("utf-8")
        except InvalidToken:
            raise SecretKeyError(
                f"secret {name!r} cannot be decrypted with this server's key: it was stored "
                f"with another FLOWFORGE_SECRET_KEY (set the old key after the new one, "
                f"comma-separated, to read it)") from None


def _key_file() -> Path:
    named = os.environ.get("FLOWFORGE_SECRET_KEY_FILE")
    if named:
        return Path(named)
    from platformdirs import user_data_dir

    return Path(user_data_dir("flowforge")) / "secret.key"


def secret_box() -> SecretBox:
    """The box for this process's key (see the module docstring for where it comes from)."""
    configured = os.environ.get("FLOWFORGE_SECRET_KEY", "").strip()
    if configured:
        return SecretBox([part.strip().encode() for part in configured.split(",")
                          if part.strip()])
    path = _key_file()
    if not path.exists():
        from cryptography.fernet import Fernet

        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(Fernet.generate_key())
    try:
        return SecretBox([line.strip() for line in path.read_bytes().splitlines()
                          if line.strip()])
    except OSError as exc:
        raise SecretKeyError(f"cannot read the secret key file {path}: {exc}") from None


def check_secret_name(name: Any) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise InvalidValue(f"secret name {name!r}: use letters, digits and '_', starting with "
                           f"a letter or '_' (at most 128), e.g. OPENAI_API_KEY")
    return name


async def set_secret(storage: Storage, user_id: str, name: str, value: str,
                     box: SecretBox | None = None) -> None:
    check_secret_name(name)
    if not isinstance(value, str) or not value:
        raise InvalidValue(f"secret {name}: the value must be a non-empty string")
    if len(value.encode("utf-8", "surrogatepass")) > MAX_SECRET_BYTES:
        raise InvalidValue(f"secret {name}: the value is larger than {MAX_SECRET_BYTES} bytes")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidValue(f"secret {name}: the value is not valid text (a lone surrogate)") \
            from None
    await storage.put_secret(user_id, name, (box or secret_box()).encrypt(value))
    _forget_loading(storage, user_id)


async def list_secrets(storage: Storage, user_id: str) -> list[dict[str, Any]]:
    return await storage.list_secrets(user_id)


async def delete_secret(storage: Storage, user_id: str, name: str) -> None:
    deleted = await storage.delete_secret(user_id, name)
    _forget_loading(storage, user_id)
    if not deleted:
        raise NotFound(f"no secret '{name}' (list them with `flowforge secrets list`)")


async def load_secrets(storage: Storage | None, user_id: str,
                       box: SecretBox | None = None) -> dict[str, str]:
    """Every secret of the user, decrypted (for one run; never stored again).

    Runs of one user starting at the same moment share one read: 500 runs
    starting together made 500 queries (on PostgreSQL, 500 round trips before
    any run could start).  A secret set or deleted in this process is seen by
    every run started after it."""
    if storage is None:
        return {}
    key = (id(storage), user_id, id(box))
    loading = _loading.get(key)
    if loading is None or loading.get_loop() is not asyncio.get_running_loop():
        loading = asyncio.ensure_future(_load_secrets(storage, user_id, box))
        _loading[key] = loading
        loading.add_done_callback(lambda done: _loading.pop(key, None)
                                  if _loading.get(key) is done else None)
    return dict(await asyncio.shield(loading))


#: Reads in flight, by (storage, user, box): joined by runs that start meanwhile.
_loading: dict[tuple[int, str, int], asyncio.Future] = {}


def _forget_loading(storage: Storage, user_id: str) -> None:
    for key in [k for k in _loading if k[0] == id(storage) and k[1] == user_id]:
        del _loading[key]


async def _load_secrets(storage: Storage, user_id: str,
                        box: SecretBox | None) -> dict[str, str]:
    stored = await storage.secret_ciphertexts(user_id)
    if not stored:
        return {}
    box = box or secret_box()
    return {name: box.decrypt(token, name) for name, token in stored.items()}
