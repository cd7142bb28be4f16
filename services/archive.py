"""A revert's archive on disk: the manifest of every affected artifact, and copies.

Written *before* the revert's transaction, into a folder named by the correction and
emptied first, so a retry starts from the same clean place and a crash leaves at worst
a folder whose correction never applied (it is removed when the correction ends FAILED).

A recorded path is untrusted input, and ARTIFACTS_ROOT is a tree agents write to, so
nothing here follows a symbolic link: the source is opened component by component
from ARTIFACTS_ROOT with O_NOFOLLOW (a link anywhere on the way, or a non-regular
file, is not copied), and every folder and file below ARCHIVE_ROOT is created the same
way, files with O_EXCL. A path that is absolute, has '..', a NUL or control character
or an over-long component (recorded before the `safe_artifact_path` rule existed) is
listed in the manifest as skipped with the reason, never opened. Any OSError while
writing the archive propagates: the service ends the attempt FAILED with it.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from contracts.corrections.revert import MANIFEST_NAME, RevertWrites, archive_folder
from contracts.decisions.artifacts import artifact_path_problem

COPY_CHUNK = 1 << 20
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO planted in the tree must not block the worker; a regular
# file ignores it.
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class NotAFolder(OSError):
    """A link (or a file) stands where a folder of the path should be."""


@contextmanager
def _fd(fd: int) -> Iterator[int]:
    try:
        yield fd
    finally:
        os.close(fd)


def _parts(relative: str) -> list[str]:
    return [p for p in relative.split("/") if p not in {"", "."}]


def _open_dirs(base: int, parts: list[str], *, create: bool) -> int:
    """An fd of base/parts..., never through a link; folders made when `create`."""
    fd = os.dup(base)
    try:
        for part in parts:
            if create:
                with suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=fd)
            try:
                nxt = os.open(part, _DIR, dir_fd=fd)
            except OSError as exc:
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                raise NotAFolder(exc.errno, f"{'/'.join(parts)}: {part!r} is a link or not "
                                 "a folder, and the archive never follows links") from exc
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd


class Archive:
    def __init__(self, archive_root: Path, artifacts_root: Path | None = None) -> None:
        self.archive_root = archive_root
        self.artifacts_root = artifacts_root.resolve() if artifacts_root else None

    def folder(self, plan_id: str, correction_id: str) -> Path:
        return self.archive_root / archive_folder(plan_id, correction_id)

    def write(self, writes: RevertWrites) -> str:
        """Copy what exists safely, write the manifest; return the folder's absolute path."""
        # The configured root is trusted (an operator chose it); what lies below it is
        # created without following links.
        root = self.archive_root
        root.mkdir(parents=True, exist_ok=True)
        rel = _parts(archive_folder(writes.plan_id, writes.correction_id))
        with _fd(os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)) as root_fd, \
                _fd(_open_dirs(root_fd, rel[:-1], create=True)) as parent:
            # A retry starts from an empty folder, so O_EXCL never meets its own copies.
            self._remove_entry(parent, rel[-1])
            with _fd(_open_dirs(parent, rel[-1:], create=True)) as folder:
                entries = [self._archive_one(folder, entry.model_dump(mode="json"))
                           for entry in writes.manifest]
                manifest = {
                    "correction_id": writes.correction_id, "plan_id": writes.plan_id,
                    "target_decision_id": writes.target_decision_id,
                    "new_decision_id": writes.new_decision.decision_id,
                    "superseded_ids": writes.supersede_ids,
                    "child_plans_rolled_back": writes.child_plans_to_roll_back,
                    "artifacts": entries,
                }
                tmp = MANIFEST_NAME + ".tmp"
                with _fd(os.open(tmp, _CREATE, 0o644, dir_fd=folder)) as out:
                    _write_all(out, json.dumps(manifest, indent=2).encode())
                # A reader never sees half a manifest.
                os.replace(tmp, MANIFEST_NAME, src_dir_fd=folder, dst_dir_fd=folder)
        return str(self.folder(writes.plan_id, writes.correction_id).resolve())

    def remove(self, plan_id: str, correction_id: str) -> None:
        """Remove the correction's folder, reached without following links (a link
        planted on the way must not make this delete elsewhere); best effort."""
        rel = _parts(archive_folder(plan_id, correction_id))
        try:
            with _fd(os.open(self.archive_root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
                     ) as root_fd, _fd(_open_dirs(root_fd, rel[:-1], create=False)) as parent:
                self._remove_entry(parent, rel[-1])
        except OSError:
            pass  # nothing there, or not ours to touch

    def _archive_one(self, folder: int, entry: dict[str, object]) -> dict[str, object]:
        path = str(entry["artifact_path"])
        problem = artifact_path_problem(path)
        if problem is not None:
            return {**entry, "copied": False,
                    "skipped": f"unsafe artifact_path (recorded before the "
                               f"safe_artifact_path rule): {problem}"}
        if self.artifacts_root is None:
            return {**entry, "copied": False}
        copied = self._copy(path, folder, str(entry["archived_as"]))
        return {**entry, "copied": copied} if copied else \
            {**entry, "copied": False, "skipped": "missing, a link, or not a regular file"}

    def _copy(self, artifact_path: str, folder: int, archived_as: str) -> bool:
        """Copy ARTIFACTS_ROOT/artifact_path to folder/archived_as; False if there is no
        regular file reachable without following a link."""
        assert self.artifacts_root is not None
        src_parts = _parts(artifact_path)
        if not src_parts:
            return False
        try:
            src = self._open_source(src_parts)
        except OSError:
            return False  # absent, a link on the way, or unreadable: not copied
        if src is None:
            return False
        with _fd(src):
            dest = _parts(archived_as)
            with _fd(_open_dirs(folder, dest[:-1], create=True)) as where, \
                    _fd(os.open(dest[-1], _CREATE, 0o644, dir_fd=where)) as out:
                while chunk := os.read(src, COPY_CHUNK):
                    _write_all(out, chunk)
                st = os.fstat(src)
                os.utime(out, ns=(st.st_atime_ns, st.st_mtime_ns))
        return True

    def _open_source(self, parts: list[str]) -> int | None:
        assert self.artifacts_root is not None
        with _fd(os.open(self.artifacts_root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
                 ) as base, _fd(_open_dirs(base, parts[:-1], create=False)) as where:
            fd = os.open(parts[-1], _READ, dir_fd=where)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            return None
        os.set_blocking(fd, True)
        return fd

    @staticmethod
    def _remove_entry(parent: int, name: str) -> None:
        try:
            st = os.stat(name, dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            return
        if stat.S_ISDIR(st.st_mode):
            shutil.rmtree(name, dir_fd=parent)
        else:  # a link or file planted where the folder goes: removed, never followed
            os.unlink(name, dir_fd=parent)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
