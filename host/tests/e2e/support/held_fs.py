"""A pass-through FUSE file system for the e2e tests (`held_fs.rs`).

Usage: held_fs.py BACKING MOUNT CONTROL HOLD

Every operation on MOUNT acts on the folder BACKING. Once CONTROL/armed exists, the first
operation that makes an entry named HOLD (a file created, a folder made, a rename or link
onto the name) waits until CONTROL/release exists, after writing CONTROL/held; while it
waits, every path looked up is appended to CONTROL/lookups. So a
test can stop a server in the middle of a long operation, see what else touched the
folder meanwhile, and let it go on, with no hook in the server.
"""

import ctypes
import errno
import os
import sys
import threading
import time

import mfusepy as fuse

RENAME_NOREPLACE = 1
AT_FDCWD = -100
LIBC = ctypes.CDLL(None, use_errno=True)


def renameat2(old, new, flags):
    if LIBC.renameat2(AT_FDCWD, old.encode(), AT_FDCWD, new.encode(), flags) != 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))


class HeldFs(fuse.Operations):
    use_ns = True

    def __init__(self, backing, control, hold):
        self.backing = os.path.realpath(backing)
        self.control = os.path.realpath(control)
        self.hold = hold
        self.holding = False
        self.held_once = False
        self.mutex = threading.Lock()

    def _p(self, path):
        return self.backing + path

    def _note(self, path):
        if self.holding:
            with open(os.path.join(self.control, "lookups"), "a") as f:
                f.write(path + "\n")

    def access(self, path, mode):
        if not os.access(self._p(path), mode):
            raise fuse.FuseOSError(errno.EACCES)
        return 0

    def chmod(self, path, mode):
        return os.chmod(self._p(path), mode)

    def chown(self, path, uid, gid):
        return os.chown(self._p(path), uid, gid)

    def _maybe_hold(self, path):
        if os.path.basename(path) != self.hold:
            return
        with self.mutex:
            if self.held_once or not os.path.exists(os.path.join(self.control, "armed")):
                return
            self.held_once = True
        self.holding = True
        open(os.path.join(self.control, "held"), "w").close()
        while not os.path.exists(os.path.join(self.control, "release")):
            time.sleep(0.01)
        self.holding = False

    def create(self, path, mode, fi=None):
        self._maybe_hold(path)
        return os.open(self._p(path), os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)

    def getattr(self, path, fh=None):
        self._note(path)
        st = os.lstat(self._p(path))
        attrs = {
            key: getattr(st, key)
            for key in ("st_gid", "st_mode", "st_nlink", "st_size", "st_uid", "st_ino")
        }
        attrs.update(
            st_atime=st.st_atime_ns, st_mtime=st.st_mtime_ns, st_ctime=st.st_ctime_ns
        )
        return attrs

    def link(self, target, source):
        self._maybe_hold(target)
        return os.link(self._p(source), self._p(target))

    def mkdir(self, path, mode):
        self._maybe_hold(path)
        return os.mkdir(self._p(path), mode)

    def open(self, path, flags):
        return os.open(self._p(path), flags)

    def read(self, path, size, offset, fh):
        return os.pread(fh, size, offset)

    def readdir(self, path, fh):
        return [".", ".."] + os.listdir(self._p(path))

    def readlink(self, path):
        return os.readlink(self._p(path))

    def release(self, path, fh):
        return os.close(fh)

    def rename(self, old, new, flags=0):
        self._maybe_hold(new)
        return renameat2(self._p(old), self._p(new), flags)

    def rmdir(self, path):
        return os.rmdir(self._p(path))

    def statfs(self, path):
        s = os.statvfs(self._p(path))
        return {
            key: getattr(s, key)
            for key in (
                "f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail",
                "f_ffree", "f_files", "f_flag", "f_frsize", "f_namemax",
            )
        }

    def symlink(self, target, source):
        return os.symlink(source, self._p(target))

    def truncate(self, path, length, fh=None):
        return os.truncate(self._p(path), length)

    def unlink(self, path):
        return os.unlink(self._p(path))

    def utimens(self, path, times=None):
        return os.utime(self._p(path), ns=times) if times else os.utime(self._p(path))

    def write(self, path, data, offset, fh):
        return os.pwrite(fh, data, offset)

    def flush(self, path, fh):
        return 0

    def fsync(self, path, datasync, fh):
        return os.fsync(fh)

    def fsyncdir(self, path, datasync, fh):
        return 0


class Fuse(fuse.FUSE):
    # mfusepy drops rename's flags; a create-only rename (RENAME_NOREPLACE) must keep them.
    def rename_fuse_3(self, old, new, flags):
        return self.operations.rename(
            old.decode(self.encoding, self.errors),
            new.decode(self.encoding, self.errors),
            flags,
        )


if __name__ == "__main__":
    backing, mount, control, hold = sys.argv[1:5]
    Fuse(HeldFs(backing, control, hold), mount, foreground=True, nothreads=False)
