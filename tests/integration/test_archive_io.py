"""The archive's I/O without servers: the watchdog over a thread stuck in the kernel (a
FIFO's open waits for a writer, as a hung NFS read waits for its server), and copies
that keep holes whatever the file's shape."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from services.archive.copy import copy_file, data_extents
from services.archive.watch import ArchiveStalled, Progress, run_watched
from tests.conftest import ROOT
from tests.integration.correction_support import release

STUCK = """
import asyncio, os, sys
from services.archive.watch import ArchiveStalled, run_watched

async def main():
    try:
        await run_watched(lambda p: os.open(sys.argv[1], os.O_RDONLY), 0.5)
    except ArchiveStalled as exc:
        print("stalled:", exc, flush=True)

asyncio.run(main())
"""


def test_a_thread_stuck_in_the_kernel_does_not_hold_the_process_exit(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    try:
        done = subprocess.run([sys.executable, "-c", STUCK, str(fifo)], cwd=ROOT,
                              capture_output=True, text=True, timeout=60, check=False)
    finally:
        release(fifo)  # only if the process hung: then the test fails on its timeout
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("stalled: no progress for 0.5 s starting")


async def test_the_watchdog_waits_on_progress_not_on_the_total_time() -> None:
    def steady(p: Progress) -> str:
        for i in range(8):
            time.sleep(0.1)
            p.step(f"step {i}")
        return "done"

    assert await run_watched(steady, 0.4) == "done"  # 0.8 s in all, a step every 0.1 s

    def fails(p: Progress) -> None:
        raise PermissionError(13, "read-only file system")

    with pytest.raises(PermissionError):
        await run_watched(fails, 1)

    def stalls(p: Progress) -> None:
        p.step("reading artifact 'x'", artifact="D/0/x")
        time.sleep(1.0)
        p.step()  # the waiter gave up: the thread stops here

    with pytest.raises(ArchiveStalled) as caught:
        await run_watched(stalls, 0.2)
    assert caught.value.artifact == "D/0/x"
    assert str(caught.value).startswith("no progress for 0.2 s reading artifact 'x'")
    await asyncio.sleep(1.0)  # the abandoned thread ends on its own (Abandoned)


@pytest.mark.parametrize("shape", ["empty", "all data", "hole first", "hole last", "holes"])
def test_a_copy_keeps_the_data_and_the_holes(tmp_path: Path, shape: str) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    size = 0 if shape == "empty" else 8 << 20
    runs = {"empty": [], "all data": [(0, size)], "hole first": [(4 << 20, size)],
            "hole last": [(0, 1 << 20)], "holes": [(0, 4096), (2 << 20, 3 << 20),
                                                 (6 << 20, (6 << 20) + 4096)]}[shape]
    with src.open("wb") as f:
        f.truncate(size)
        for start, end in runs:
            f.seek(start)
            f.write(os.urandom(end - start))
    s, d = os.open(src, os.O_RDONLY), os.open(dst, os.O_WRONLY | os.O_CREAT)
    try:
        assert list(data_extents(s, size)) == runs
        copy_file(s, d, size, Progress())
    finally:
        os.close(s)
        os.close(d)
    assert dst.read_bytes() == src.read_bytes()
    assert dst.stat().st_blocks <= src.stat().st_blocks + 8  # a few KiB of slack at most
