"""Folders and files reached without following a link, and what stands at a path.

ARTIFACTS_ROOT is a tree agents write to, and a recorded path is untrusted input, so a
source is opened component by component with O_NOFOLLOW and only after an lstat said
it is a regular file (a FIFO or a device is never opened); below ARCHIVE_ROOT every
folder is created and opened the same way and every file with O_EXCL.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from contracts.corrections.archive.rules import Source, SourceKind

DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: should a FIFO replace the file between the lstat and the open, the open
# does not wait for a writer; a regular file ignores it.
READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
ROOT = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
"""A configured root: trusted (an operator chose it), so followed like any path."""
CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class NotAFolder(OSError):
    """A link (or a file) stands where a folder of the path should be."""


@contextmanager
def closing(fd: int) -> Iterator[int]:
    try:
        yield fd
    finally:
        os.close(fd)


def parts_of(relative: str) -> list[str]:
    return [p for p in relative.split("/") if p not in {"", "."}]


def open_dirs(base: int, parts: list[str], *, create: bool) -> int:
    """An fd of base/parts..., never through a link; folders made when `create`."""
    fd = os.dup(base)
    try:
        for part in parts:
            if create:
                with suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=fd)
            try:
                nxt = os.open(part, DIR, dir_fd=fd)
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


def remove_entry(parent: int, name: str) -> None:
    """Remove parent/name, a folder with its content or anything else; never followed."""
    try:
        st = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(name, dir_fd=parent)
    else:  # a link or file planted where the folder goes: removed, never followed
        os.unlink(name, dir_fd=parent)


def _what(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a device or other special file"


def _look_at(where: int, name: str, shown: str, *, folder: bool) -> Source | None:
    """None when where/name is what the walk needs (a folder, or a regular file);
    otherwise why not, from an lstat (no link followed, nothing opened)."""
    try:
        st = os.stat(name, dir_fd=where, follow_symlinks=False)
    except FileNotFoundError:
        return Source(SourceKind.MISSING, detail=f"no {shown!r}" if folder else "")
    except OSError as exc:
        return Source(SourceKind.UNREADABLE, detail=f"{shown!r}: {exc.strerror}")
    if stat.S_ISLNK(st.st_mode):
        return Source(SourceKind.LINK, detail=f"{shown!r} is a symbolic link, never followed")
    if folder:
        return None if stat.S_ISDIR(st.st_mode) else Source(
            SourceKind.MISSING, detail=f"{shown!r} is not a folder")
    return None if stat.S_ISREG(st.st_mode) else Source(SourceKind.NOT_REGULAR,
                                                        detail=_what(st.st_mode))


def open_source(root: int, parts: list[str]) -> tuple[Source, int | None]:
    """What stands at root/parts, and an open read fd when it is a regular file."""
    where = os.dup(root)
    try:
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            found = _look_at(where, part, "/".join(parts[: i + 1]), folder=not last)
            if found is not None:
                return found, None
            try:
                fd = os.open(part, READ if last else DIR, dir_fd=where)
            except OSError as exc:  # it changed since the lstat, or may not be read
                return Source(SourceKind.UNREADABLE, detail=exc.strerror or str(exc)), None
            if last:
                return _opened(fd)
            os.close(where)
            where = fd
        return Source(SourceKind.MISSING, detail="empty path"), None
    finally:
        os.close(where)


def _opened(fd: int) -> tuple[Source, int | None]:
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):  # replaced between the lstat and the open
        os.close(fd)
        return Source(SourceKind.NOT_REGULAR, detail=_what(st.st_mode)), None
    os.set_blocking(fd, True)
    return Source(SourceKind.REGULAR, st.st_size, st.st_blocks * 512), fd


class Sources:
    """ARTIFACTS_ROOT held open for one archive; every artifact is reached from it."""

    def __init__(self, root: Path | None) -> None:
        self.root = root
        self.fd: int | None = None
        self.problem = Source(SourceKind.MISSING, detail="ARTIFACTS_ROOT is unset")

    def __enter__(self) -> Sources:
        if self.root is not None:
            try:
                self.fd = os.open(self.root, ROOT)
            except OSError as exc:
                self.problem = Source(SourceKind.MISSING,
                                      detail=f"ARTIFACTS_ROOT {self.root}: {exc.strerror}")
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            os.close(self.fd)

    def open(self, artifact_path: str) -> tuple[Source, int | None]:
        if self.fd is None:
            return self.problem, None
        return open_source(self.fd, parts_of(artifact_path))
