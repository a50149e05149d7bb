#!/usr/bin/env python3
"""A passthrough FUSE file system that stands for NFS in fs-guard's tests.

Usage: nfs_like_fs.py BACKING_DIR MOUNT_POINT   (runs in the foreground until unmounted)

It mirrors BACKING_DIR at MOUNT_POINT and differs from a local file system in the two
primitives where Linux's NFS client differs, so the fallbacks of docs/deploy.md ("On NFS")
run for real:

- rename with any flag (RENAME_NOREPLACE, RENAME_EXCHANGE) is refused with EINVAL, as the
  NFS client refuses it (NFS has no atomic "rename unless the name exists"); a plain rename
  works;
- O_TMPFILE is refused: no FUSE file system served by libfuse's high-level API has it, and
  neither has NFS.

mfusepy 3.x drops the flags of rename before calling `Operations.rename` (its
`FUSE.rename_fuse_3` calls `rename_fuse_2(old, new)`), which would turn RENAME_NOREPLACE into a
rename that replaces. So the refusal is made one level down, in a `FUSE` subclass that sees
the flags.

Inode numbers are the backing folder's (`use_ino`, with st_ino passed through), so `..` and
fstat agree on device and inode as on NFS, where the server's file ids are the inode numbers.

Test hook, standing for another NFS client: when a flagged rename is refused and its
destination's name starts with `appears-`, that name is created in the backing folder first
(an empty folder if the source is a folder, else a file holding `other client`), so the
name exists although the kernel saw it free when the move began.
"""

import errno
import os
import sys

import mfusepy

APPEARING_PREFIX = "appears-"
OTHER_CLIENT_TEXT = b"other client"


class NfsLikeFuse(mfusepy.FUSE):
    """The FUSE binding, with rename refused when it carries flags (see the module doc)."""

    def rename_fuse_3(self, old, new, flags):
        if flags != 0:
            self.operations.another_client_may_create(
                old.decode(self.encoding, self.errors), new.decode(self.encoding, self.errors)
            )
            return -errno.EINVAL
        return super().rename_fuse_3(old, new, flags)


class Passthrough(mfusepy.Operations):
    """Every operation fs-guard uses, applied to the same path under the backing folder."""

    use_ns = True

    def __init__(self, backing):
        self.backing = os.path.realpath(backing)

    def _full(self, path):
        return os.path.join(self.backing, path.lstrip("/"))

    def another_client_may_create(self, old, new):
        """The test hook of the module doc."""
        if not os.path.basename(new).startswith(APPEARING_PREFIX):
            return
        target = self._full(new)
        if os.path.isdir(self._full(old)) and not os.path.islink(self._full(old)):
            os.mkdir(target)
        else:
            with open(target, "xb") as file:
                file.write(OTHER_CLIENT_TEXT)

    # ------------------------------------------------------------ attributes

    def getattr(self, path, fh=None):
        st = os.fstat(fh) if fh is not None else os.lstat(self._full(path))
        keys = ("st_mode", "st_ino", "st_nlink", "st_uid", "st_gid", "st_size", "st_blocks")
        attrs = {key: getattr(st, key) for key in keys}
        attrs["st_atime"] = st.st_atime_ns
        attrs["st_mtime"] = st.st_mtime_ns
        attrs["st_ctime"] = st.st_ctime_ns
        return attrs

    def chmod(self, path, mode):
        os.chmod(self._full(path), mode)
        return 0

    def utimens(self, path, times=None):
        if times is None:
            os.utime(self._full(path), follow_symlinks=False)
        else:
            os.utime(self._full(path), ns=times, follow_symlinks=False)
        return 0

    def statfs(self, path):
        sv = os.statvfs(self._full(path))
        keys = ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree",
                "f_files", "f_flag", "f_frsize", "f_namemax")
        return {key: getattr(sv, key) for key in keys}

    # ------------------------------------------------------------ folders

    def readdir(self, path, fh):
        folder = self._full(path)
        entries = [(".", None, 0), ("..", None, 0)]
        for name in os.listdir(folder):
            st = os.lstat(os.path.join(folder, name))
            entries.append((name, {"st_mode": st.st_mode, "st_ino": st.st_ino}, 0))
        return entries

    def mkdir(self, path, mode):
        os.mkdir(self._full(path), mode)
        return 0

    def rmdir(self, path):
        os.rmdir(self._full(path))
        return 0

    def fsyncdir(self, path, datasync, fh):
        return 0

    # ------------------------------------------------------------ names

    def unlink(self, path):
        os.unlink(self._full(path))
        return 0

    def link(self, target, source):
        # `target` is the new name. Never follow: a symlink is linked as a link.
        os.link(self._full(source), self._full(target), follow_symlinks=False)
        return 0

    def symlink(self, target, source):
        # `target` is the link's path, `source` its content.
        os.symlink(source, self._full(target))
        return 0

    def readlink(self, path):
        return os.readlink(self._full(path))

    def rename(self, old, new):
        os.rename(self._full(old), self._full(new))
        return 0

    # ------------------------------------------------------------ files

    def create(self, path, mode, flags):
        return os.open(self._full(path), flags | os.O_CREAT, mode)

    def open(self, path, flags):
        return os.open(self._full(path), flags & ~(os.O_CREAT | os.O_EXCL))

    def read(self, path, size, offset, fh):
        return os.pread(fh, size, offset)

    def write(self, path, data, offset, fh):
        return os.pwrite(fh, data, offset)

    def truncate(self, path, length, fh=None):
        if fh is not None:
            os.ftruncate(fh, length)
        else:
            os.truncate(self._full(path), length)
        return 0

    def fsync(self, path, datasync, fh):
        if datasync:
            os.fdatasync(fh)
        else:
            os.fsync(fh)
        return 0

    def release(self, path, fh):
        os.close(fh)
        return 0


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: nfs_like_fs.py BACKING_DIR MOUNT_POINT")
    backing, mount_point = sys.argv[1], sys.argv[2]
    # use_ino: the kernel shows the backing inode numbers (see the module doc).
    # default_permissions: the kernel checks modes, as for a local file system.
    NfsLikeFuse(
        Passthrough(backing),
        mount_point,
        foreground=True,
        use_ino=True,
        default_permissions=True,
        fsname="rojos-nfs-like",
    )


if __name__ == "__main__":
    main()
