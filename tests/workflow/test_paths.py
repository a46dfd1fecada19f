"""One rule for where a relative path in a document points (issue 25): the
document's own folder on the command line, one documented root on a server,
never a server's working directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from flowforge.errors import WorkflowError
from flowforge.workflow.paths import document_root, resolve_path


@pytest.mark.parametrize("source, services, expected", [
    ("/docs/flows/a.yaml", None, "/docs/flows"),                       # CLI: its folder
    (None, None, "<cwd>"),                                             # built in memory
    (None, {"document_dir": "/docs/flows"}, "/docs/flows"),           # a queued CLI run
    (None, {"files_root": "/srv/files"}, "/srv/files"),                # server, root set
    ("/docs/flows/a.yaml", {"files_root": "/srv/files"}, "/srv/files"),   # one root
    ("/docs/flows/a.yaml", {"files_root": None}, "/docs/flows"),       # server, file known
    (None, {"files_root": None}, None),                                # server, nothing
])
def test_the_root_a_document_resolves_against(source, services, expected):
    root = document_root(source, services)
    assert root == (Path.cwd() if expected == "<cwd>" else
                    None if expected is None else Path(expected))


def test_relative_paths_join_the_root_and_absolute_ones_stay():
    assert resolve_path("nested/greeting.yaml", Path("/docs"), "nested workflow") == \
        Path("/docs/nested/greeting.yaml")
    assert resolve_path("/etc/rules.yaml", None, "scripted rules file") == \
        Path("/etc/rules.yaml")


def test_a_server_without_a_root_refuses_naming_files_root():
    with pytest.raises(WorkflowError) as caught:
        resolve_path("policies", None, "knowledge source")
    message = str(caught.value)
    assert "knowledge source 'policies' is a relative path" in message
    assert "--files-root" in message and str(Path.cwd()) not in message


def test_a_weights_fingerprint_follows_the_content_not_the_file_time(tmp_path):
    import os

    from flowforge.workflow.paths import weights_fingerprint

    content = bytes(range(256)) * 4096                              # 1 MiB
    first, second = tmp_path / "a.bin", tmp_path / "b.bin"
    first.write_bytes(content)
    second.write_bytes(content)
    os.utime(second, (1, 1))                                        # another install's time
    assert weights_fingerprint(first) == weights_fingerprint(second)
    changed = bytearray(content)
    changed[700_000] ^= 1                                           # other weights, same size
    second.write_bytes(bytes(changed))
    assert weights_fingerprint(first) != weights_fingerprint(second)
    first.write_bytes(content[:-1])                                 # other size
    assert weights_fingerprint(first) != weights_fingerprint(tmp_path / "b.bin")
