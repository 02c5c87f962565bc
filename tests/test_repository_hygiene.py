"""No key material in the repository, and none can be added by accident.

The AES key that sealed every webhook secret was once committed (issue 10); it is public
now. These tests scan every tracked file, so it (or any other key) cannot come back.
"""

from __future__ import annotations

import base64
import re
import secrets
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO

#: What our keys and the usual private keys look like when written to a file.
KEY_PATTERNS = {
    # delivery.secret_key_file / secret_encryption_key: 32 bytes, urlsafe base64 + "=".
    "32-byte base64 key": re.compile(r"(?<![A-Za-z0-9_+/=-])[A-Za-z0-9_+/-]{43}=(?![A-Za-z0-9=])"),
    "PEM private key": re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    "webhook secret": re.compile(r"whsec_[0-9a-f]{64}"),
    "API key": re.compile(r"dpm_[A-Za-z0-9_-]{30,}"),
}
KEY_FILE_NAMES = re.compile(r"(^|/)([^/]*\.secret-key|secret-key(\.new)?|[^/]*\.pem|id_rsa)$")


def tracked_files() -> list[str]:
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout: nothing is tracked")
    git = shutil.which("git")
    assert git
    out = subprocess.run([git, "-C", str(REPO), "ls-files", "-z"], capture_output=True,
                         check=True).stdout
    return [p for p in out.decode().split("\0") if p]


def key_material(text: str) -> list[str]:
    return [name for name, pattern in KEY_PATTERNS.items() if pattern.search(text)]


def test_no_tracked_file_holds_key_material() -> None:
    found: list[str] = []
    for name in tracked_files():
        path = REPO / name
        if KEY_FILE_NAMES.search(name):
            found.append(f"{name}: a key file name")
        if not path.is_file() or path.stat().st_size > 2_000_000:
            continue
        text = path.read_bytes().decode("utf-8", "replace")
        found += [f"{name}: {kind}" for kind in key_material(text)]
    assert not found, f"key material in tracked files: {found}"


def test_the_scanner_finds_real_keys() -> None:
    """The scan above can fail: each kind of key we generate is recognised."""
    from monitor.webhooks.apikeys import new_api_key
    from monitor.webhooks.secrets import encode_key, new_secret

    key_file = encode_key(secrets.token_bytes(32)) + "\n"
    assert key_material(key_file) == ["32-byte base64 key"]
    assert key_material(f'key = "{base64.b64encode(secrets.token_bytes(32)).decode()}"')
    assert key_material(f"secret: {new_secret()}") == ["webhook secret"]
    assert key_material(f"x-api-key: {new_api_key()}") == ["API key"]
    assert KEY_FILE_NAMES.search("depeg-monitor.secret-key")
    assert not key_material("sha256 " + secrets.token_hex(32))  # digests are not keys


@pytest.mark.parametrize("name", ["depeg-monitor.secret-key", "secret-key", "depeg-monitor.db",
                                  "run.json", "data/secret-key"])
def test_runtime_files_are_ignored_by_git(name: str) -> None:
    """Even written into the checkout by hand, `git add -A` would not pick them up."""
    tracked_files()  # skips outside a checkout
    git = shutil.which("git")
    assert git
    result = subprocess.run([git, "-C", str(REPO), "check-ignore", "-q", "--no-index", name])
    assert result.returncode == 0, f"{name} is not ignored by .gitignore"


def test_no_default_path_is_relative() -> None:
    """Runtime files default to the data directory, never the current directory."""
    from monitor.config import load_config

    config = load_config(env={"HOME": "/home/someone"})
    db = config.storage.url.removeprefix("sqlite:///")
    assert Path(db).is_absolute() and Path(config.delivery.secret_key_file).is_absolute()
    assert db.startswith("/home/someone/.local/share/depeg-monitor/")
    assert Path(config.storage.data_dir) == Path("/home/someone/.local/share/depeg-monitor")


def test_the_session_guard_flags_runtime_files_in_the_checkout() -> None:
    """The guard in conftest.py (the whole suite runs under it) would catch these."""
    from tests.conftest import _edited_source

    for line in ("?? transitions.jsonl", "!! depeg-monitor.db", "!! depeg-monitor.secret-key",
                 "?? run.json", "!! data/"):
        assert not _edited_source(line), line
    assert _edited_source(" M monitor/cli.py") and _edited_source("?? monitor/new_module.py")
