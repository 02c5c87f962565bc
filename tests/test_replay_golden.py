"""Replay outputs stay byte-identical while the replay path is made faster (issue 15).

The truth is the SHA-256 of what ``depeg-monitor replay --ratings`` wrote on every shared
real file (and on the three merged) at main ``b44f764``, before any optimisation: the
transitions file, the ratings file and the summary (output paths blanked). Data-derived
outputs may not be committed; their digests may. Any change to the engine, parsing or
encoding that moves one byte fails here. A deliberate model change regenerates them with
``python tests/test_replay_golden.py`` and says so in its commit message.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
from pathlib import Path

import pytest

from monitor.config import Config
from monitor.replay import command
from tests.conftest import data_file

FILES = {
    "busd": ("ticks/busd_2023-02_binance_1m.csv",),
    "usdc_chainlink": ("ticks/usdc_2022-11_to_2023-03_chainlink.csv",),
    "usdc_1m": ("ticks/usdc_2023-03_binanceus_1m.csv",),
    "all_three": ("ticks/busd_2023-02_binance_1m.csv",
                  "ticks/usdc_2022-11_to_2023-03_chainlink.csv",
                  "ticks/usdc_2023-03_binanceus_1m.csv"),
}

#: case -> (transitions, ratings, summary) SHA-256, recorded at main b44f764.
GOLDEN: dict[str, tuple[str, str, str]] = {
    "all_three": (
        "def3c165403e1ab08800f8216b1d2e7841c3c8be07d4ab72ce489b076f682f63",
        "50c4a171389a3e7146de506910c347527b65a4905a676bb7e623fe8ce615d176",
        "fe32179bf18ed083440aa841abf5e79cac0a0f9c62c76d1a15c6b2a46d7c19d8",
    ),
    "busd": (
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "378c9a81bb3b6cf243ecd6b22013e9753a78c1b4df69c74e2aef684f777cc959",
        "8d050c7b098925e0fd1f6939b3cc5ee0b32f8b0c4c9ce03c8732d35d0f1601e9",
    ),
    "usdc_1m": (
        "2a7a4b47580b2bd17215639749c427b031cc9331dbdb65d2f58598ab6c9146b1",
        "7c79d440794e4c73605c0a18b87d31308fd9ec9b952602f665f72aaa73c3f714",
        "2a6b3b357fb79ba1f0cb8f2998ae0bb197a3b547675ab056d2b221e1629c7407",
    ),
    "usdc_chainlink": (
        "9629f7f8ab6429594967ec10a969fca499c4accfbb7d9cf1d8b6e6f725a5ce9d",
        "2ecbe56d5ba081df832e87341966b7bbd742ccc135c024b6710e6fb00e72836d",
        "5731591c9682395ecde8d308af7182c24091173f5bc7705b4405aa68b61eddd0",
    ),
}


def replay_digests(paths: list[Path], tmp: Path, *, ratings_too: bool = True,
                   ) -> tuple[str, str, str]:
    """Run the replay command in process, as the CLI does, and digest what it wrote."""
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    out, ratings = tmp / "transitions.jsonl", tmp / "ratings.jsonl"
    wanted = ["--ratings", str(ratings)] if ratings_too else []
    args = parser.parse_args([*map(str, paths), "--out", str(out), *wanted, "--overwrite"])
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert command.run(args, Config()) == 0
    summary = err.getvalue().replace(str(out), "OUT").replace(str(ratings), "RATINGS")
    return (hashlib.sha256(out.read_bytes()).hexdigest(),
            hashlib.sha256(ratings.read_bytes()).hexdigest() if ratings_too else "",
            hashlib.sha256(summary.encode()).hexdigest())


@pytest.mark.data
@pytest.mark.parametrize("case", sorted(FILES))
def test_replay_is_byte_identical_to_the_recorded_outputs(case: str, tmp_path: Path) -> None:
    paths = [data_file(rel) for rel in FILES[case]]
    assert replay_digests(paths, tmp_path) == GOLDEN[case]


@pytest.mark.data
def test_replay_without_ratings_writes_the_same_transitions(tmp_path: Path) -> None:
    """The default replay (no snapshots) takes a cheaper path through the engine; its
    transitions are the recorded ones all the same."""
    paths = [data_file(rel) for rel in FILES["all_three"]]
    transitions, _, _ = replay_digests(paths, tmp_path, ratings_too=False)
    assert transitions == GOLDEN["all_three"][0]


if __name__ == "__main__":  # regenerate: prints the GOLDEN table to paste above
    import tempfile

    data = Path(__file__).resolve().parents[2] / "shared" / "data"
    for case, rels in sorted(FILES.items()):
        with tempfile.TemporaryDirectory() as d:
            digests = replay_digests([data / r for r in rels], Path(d))
        print(f'    "{case}": (')
        for d in digests:
            print(f'        "{d}",')
        print("    ),")
