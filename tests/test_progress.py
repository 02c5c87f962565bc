"""The progress bar draws on a terminal and stays silent in pipes and CI logs."""

from __future__ import annotations

import io
import os

from monitor.progress import Progress


def test_draws_on_a_terminal() -> None:
    master, slave = os.openpty()
    with os.fdopen(slave, "w") as stream:
        with Progress(100, "replay", stream) as bar:
            bar.update(50)
        stream.flush()
    drawn = ""
    while "\n" not in drawn:  # the final redraw ends the line; a pty may split the writes
        try:
            chunk = os.read(master, 4096).decode()
        except OSError:  # the other end is closed and everything was read
            break
        if not chunk:
            break
        drawn += chunk
    os.close(master)
    assert "replay [" in drawn and "100.0%" in drawn


def test_silent_when_not_a_terminal() -> None:
    stream = io.StringIO()
    with Progress(100, "replay", stream) as bar:
        bar.update(50)
    assert stream.getvalue() == ""
