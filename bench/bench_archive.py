"""Archive throughput: a revert's copy of 1 GiB of real data against `cp` of the same
file on the same disk, in the same run.

    python bench/bench_archive.py [--mib 1024] [--runs 3] [--dir DIR]

Writes one file of random data (no holes: every byte is copied) under `--dir` (default:
a temporary folder), then, each run, one after the other on the same disk:

- `cp SRC DST` (coreutils): the copy in the page cache, not yet on disk;
- `cp SRC DST && sync DST`: the same, on disk;
- `Archive.write` of a revert whose one artifact is that file: the archive's own path
  (a reflink where the file system offers one, else copy_file_range), the copy fsynced
  with its folders and the manifest, which is what a revert does before APPLIED.

Every copy is removed and the disk synced before the next, so no step pays for
another's writeback. Prints MiB/s per run, the medians and the archive's ratio to each,
and this process's peak RSS (the copy does not pass through Python's memory).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from contracts.corrections.requests import CorrectionRequest  # noqa: E402
from contracts.corrections.revert import RevertWrites, revert_writes  # noqa: E402
from contracts.corrections.states import CorrectionMode  # noqa: E402
from contracts.decisions.model import Decision  # noqa: E402
from contracts.impact.risk import RiskLevel  # noqa: E402
from contracts.impact.summary import AffectedArtifact, CorrectionImpact  # noqa: E402
from contracts.shared.timestamps import utc_now  # noqa: E402
from services.archive.writer import Archive  # noqa: E402
from tests.factories import decision, root  # noqa: E402

MiB = 1 << 20


def writes_for(artifact: str) -> RevertWrites:
    """A revert of one decision that produced `artifact`."""
    r = Decision.model_validate(root(artifacts_produced=[]))
    t = Decision.model_validate(decision(r.plan_id, r.decision_id, artifacts_produced=[
        {"artifact_path": artifact, "artifact_type": "file"}]))
    impact = CorrectionImpact(
        target_decision_id=t.decision_id, affected_decision_ids=[t.decision_id],
        affected_count=1, affected_files=[artifact], affected_artifacts=[AffectedArtifact(
            decision_id=t.decision_id, artifact_path=artifact, artifact_type="file")],
        estimated_recompute_time_seconds=0, risk_level=RiskLevel.LOW)
    request = CorrectionRequest(plan_id=t.plan_id, decision_id=t.decision_id,
                                mode=CorrectionMode.REVERT, guidance="bench",
                                requested_by="bench")
    return revert_writes(request, t, impact, new_decision_id=Decision.model_validate(
        root(artifacts_produced=[])).decision_id, sequence_number=2, at=utc_now())


def write_random(path: Path, mib: int) -> None:
    with path.open("wb") as f:
        for _ in range(mib // 16):
            f.write(os.urandom(16 * MiB))
        f.flush()
        os.fsync(f.fileno())


def timed(step: Callable[[], None], cleanup: Callable[[], None], mib: int) -> float:
    """MiB/s of `step`, after a sync so no earlier writeback is charged to it."""
    os.sync()
    started = time.perf_counter()
    step()
    seconds = time.perf_counter() - started
    cleanup()
    return mib / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mib", type=int, default=1024, help="size of the file (MiB)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=None, help="where the files go")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-archive-", dir=args.dir))
    try:
        artifacts, copy = work / "artifacts", work / "copy.bin"
        artifacts.mkdir()
        src = artifacts / "data.bin"
        write_random(src, args.mib)
        archive = Archive(work / "archive", artifacts)
        writes = writes_for("data.bin")
        folder = archive.folder(writes.plan_id, writes.correction_id)
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
        rows = []
        for run in range(1, args.runs + 1):
            cp = timed(lambda: subprocess.run(["cp", str(src), str(copy)], check=True),
                       copy.unlink, args.mib)
            cp_sync = timed(lambda: subprocess.run(
                f"cp '{src}' '{copy}' && sync '{copy}'", shell=True, check=True),
                copy.unlink, args.mib)
            arch = timed(lambda: archive.write(writes), lambda: shutil.rmtree(folder),
                         args.mib)
            rows.append((run, cp, cp_sync, arch))
        rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
        print(f"{args.mib} MiB of random data under {work} "
              f"({os.statvfs(work).f_bsize}-byte blocks), {args.runs} run(s)")
        print(f"{'run':>6} {'cp MiB/s':>10} {'cp+sync MiB/s':>14} {'archive MiB/s':>14} "
              f"{'archive/cp':>11} {'archive/cp+sync':>16}")
        for run, cp, cp_sync, arch in rows:
            print(f"{run:>6} {cp:>10.0f} {cp_sync:>14.0f} {arch:>14.0f} {arch / cp:>10.0%} "
                  f"{arch / cp_sync:>15.0%}")
        med = [statistics.median(r[i] for r in rows) for i in (1, 2, 3)]
        print(f"{'median':>6} {med[0]:>10.0f} {med[1]:>14.0f} {med[2]:>14.0f} "
              f"{med[2] / med[0]:>10.0%} {med[2] / med[1]:>15.0%}")
        print(f"peak RSS of this process: {rss_before} MiB before the copies, "
              f"{rss_after} MiB after")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
