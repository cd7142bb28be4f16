"""Copying an artifact into the archive: holes stay holes, the kernel moves the bytes.

A reflink (FICLONE) first, where the file system shares extents (btrfs, XFS): no data
is copied at all. Otherwise the data extents are found with SEEK_DATA / SEEK_HOLE and
each is copied by `copy_file_range` (in-kernel; `sendfile` where that is refused), so
a 3 GiB file with a few KiB of data costs a few KiB, and no large copy passes through
Python's memory. Each chunk is a step of the watchdog's `Progress`, and the copy is
flushed to disk every FLUSH_EVERY bytes, so no single fsync waits on gigabytes.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path

from services.archive.fs import CREATE, ROOT, closing, open_dirs, parts_of
from services.archive.watch import Progress

FICLONE = 0x40049409
"""linux/fs.h: _IOW(0x94, 9, int)."""
CHUNK = 64 << 20
"""Bytes per copy_file_range call: one watchdog step."""
FLUSH_EVERY = 256 << 20
"""A copy's dirty data is flushed at least this often."""
HASH_CHUNK = 1 << 20
_UNSUPPORTED = {errno.EOPNOTSUPP, errno.ENOTTY, errno.EXDEV, errno.EINVAL, errno.ENOSYS,
                errno.EBADF, errno.EPERM}


def reflink(src: int, dst: int) -> bool:
    """Share src's extents with dst where the file system can; False where it cannot."""
    try:
        fcntl.ioctl(dst, FICLONE, src)
    except OSError as exc:
        if exc.errno in _UNSUPPORTED:
            return False
        raise
    return True


def data_extents(fd: int, size: int) -> Iterator[tuple[int, int]]:
    """(start, end) of each run of data below `size`; the whole file where the file
    system cannot tell holes apart."""
    pos = 0
    while pos < size:
        try:
            start = os.lseek(fd, pos, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # only a hole is left
                return
            if exc.errno in _UNSUPPORTED:
                yield pos, size
                return
            raise
        if start >= size:
            return
        end = min(os.lseek(fd, start, os.SEEK_HOLE), size)
        yield start, end
        pos = end


class _Kernel:
    """copy_file_range, falling back to sendfile once for the rest of the copy."""

    def __init__(self) -> None:
        self.range_ok = hasattr(os, "copy_file_range")

    def copy(self, src: int, dst: int, offset: int, count: int) -> int:
        if self.range_ok:
            try:
                return os.copy_file_range(src, dst, count, offset, offset)
            except OSError as exc:
                if exc.errno not in _UNSUPPORTED:
                    raise
                self.range_ok = False
        os.lseek(dst, offset, os.SEEK_SET)
        return os.sendfile(dst, src, offset, count)


def copy_file(src: int, dst: int, size: int, progress: Progress) -> None:
    """Copy the first `size` bytes of src into the empty dst, holes kept (the caller
    fsyncs dst once it has set its times).

    A file that shrinks while copied ends where its data ended; one that grows is
    copied up to the size it had when looked at.
    """
    if reflink(src, dst):
        progress.step()
        return
    kernel, unflushed = _Kernel(), 0
    for start, end in data_extents(src, size):
        pos = start
        while pos < end:
            n = kernel.copy(src, dst, pos, min(CHUNK, end - pos))
            if n == 0:  # the file shrank under us
                os.ftruncate(dst, pos)
                return
            pos += n
            unflushed += n
            if unflushed >= FLUSH_EVERY:
                os.fdatasync(dst)
                unflushed = 0
            progress.step()
    os.ftruncate(dst, size)  # a trailing hole, and the apparent size
    progress.step()


def copy_into(src: int, folder: int, archived_as: str, size: int, progress: Progress) -> None:
    """A new file folder/archived_as (folders made, no link followed) with src's
    content, times and an fsync."""
    dest = parts_of(archived_as)
    with closing(open_dirs(folder, dest[:-1], create=True)) as where, \
            closing(os.open(dest[-1], CREATE, 0o644, dir_fd=where)) as out:
        copy_file(src, out, size, progress)
        st = os.fstat(src)
        os.utime(out, ns=(st.st_atime_ns, st.st_mtime_ns))
        os.fsync(out)


def sha256_of(fd: int, size: int, progress: Progress) -> str:
    """SHA-256 of the first `size` bytes (read in 1 MiB pieces, one step each)."""
    digest, pos = hashlib.sha256(), 0
    while pos < size:
        chunk = os.pread(fd, min(HASH_CHUNK, size - pos), pos)
        if not chunk:
            break
        digest.update(chunk)
        pos += len(chunk)
        progress.step()
    return digest.hexdigest()


def free_bytes(fd: int) -> int:
    """What an unprivileged writer may still use on the volume holding `fd`."""
    st = os.fstatvfs(fd)
    return st.f_bavail * st.f_frsize


def free_bytes_at(path: Path) -> int | None:
    """free_bytes of the volume `path` will be on (its nearest existing folder); None
    when that cannot be told."""
    for where in (path, *path.parents):
        try:
            st = os.statvfs(where)
        except FileNotFoundError:
            continue
        except OSError:
            return None
        return st.f_bavail * st.f_frsize
    return None


def sync_tree(folder: int, progress: Progress) -> None:
    """fsync every folder below `folder` and itself, so each file's name is durable
    (each file was fsynced as it was written)."""
    for _, _, _, dir_fd in os.fwalk(".", topdown=False, dir_fd=folder):
        os.fsync(dir_fd)
        progress.step()
    os.fsync(folder)


def write_synced(folder: int, name: str, document: dict[str, object]) -> None:
    """folder/name holds `document` as JSON, whole or not at all: written to a new
    temporary file, fsynced, then renamed over (the caller fsyncs the folder)."""
    tmp = name + ".tmp"
    with suppress(FileNotFoundError):
        os.unlink(tmp, dir_fd=folder)
    with closing(os.open(tmp, CREATE, 0o644, dir_fd=folder)) as out:
        data = memoryview(json.dumps(document, indent=2).encode())
        while data:
            data = data[os.write(out, data):]
        os.fsync(out)
    os.replace(tmp, name, src_dir_fd=folder, dst_dir_fd=folder)


def fsync_path(path: Path) -> None:
    """fsync a folder named by path (a configured root's parent, once it was created)."""
    with closing(os.open(path, ROOT)) as fd:
        os.fsync(fd)
