"""out.py: the output policy of lib/cdp_out.c (cdpool(7), OUTPUTS) for the
package's writers (import-torch's checkpoint, export_onnx's file), so that
a path means to them what it means to the C tools.

check(path, inputs, ...) before anything is read or written:
- an output that is an input (the same path, or the same device and inode:
  also through a symbolic or hard link) is refused, "refusing to write
  'x.pth': it is the state dict 'x.pth'" (cdp_out_check_set);
- a target that exists and is not a regular file (a FIFO, a device, a
  socket, a directory) is refused naming what it is, "refusing to write
  '/dev/full': it is a character device, not a regular file": these
  outputs are seekable files, never streamed;
- a regular file that is a cdpool checkpoint (its magic) or an LMDB
  database file (a pool's data.mdb or lock.mdb, LMDB's magic) is not
  replaced, "refusing to replace 'run/checkpoint.cdpt': it is a cdpool
  checkpoint", unless the caller may replace that one (replace_ckpt);
- a new file needs its folder: "cannot create 'no/x': No such file or
  directory";
- a name in a GDAL virtual file system (/vsimem/, /vsizip/: it starts
  "/vsi" NAME "/", NAME lowercase letters, digits and '_') is refused, "refusing to write '/vsimem/x.cdpt': GDAL virtual file
  systems (/vsi...) are not supported for outputs".

write(path, data) writes a regular file as cdp_out_commit does: a
temporary ".NAME.cdp-tmp.PID-MARK.XXXXXX" (MARK: where_mark()) in the
folder of the final target (a symbolic link followed, so the link stays a
link), created exclusively
with the mode a plain create gives under the umask (a regular file it
replaces keeps its mode, and as root its owner and group), written, fsynced,
renamed onto the target, and the folder fsynced; the temporary is removed
on any failure. Not done, as in C: a race with another process renaming
the target between the check and the rename.

Errors are OutputError (an OSError) whose str() is the C tools' line
after "prog: ".
"""
import errno
import os
import random
import re
import stat
import string
import struct

CKPT_MAGIC = b"CDPCKPT\n"       # cdp-checkpoint(5), CDP_OUT_CKPT_MAGIC
_LMDB_MAGIC = 0xBEEFC0DE
_TAG = ".cdp-tmp."
_NAME_KEEP = 180


def where_mark():
    """The 8 hex digits in a temporary's name that say where its writer
    runs, as lib/cdp_out.c's where_mark: FNV-1a (64 bits, folded to 32) of
    "HOST\\nBOOT_ID\\nDEV:INO", the host name, the kernel's boot id and
    the identity of the process's PID namespace, what cannot be read
    empty (0:0). cdp-train sweeps a dead writer's temporary only where the
    mark is its own: a PID of another host or PID namespace means nothing
    there."""
    host = os.uname().nodename
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.readline().split("\n")[0]
    except OSError:
        boot = ""
    try:
        st = os.stat("/proc/self/ns/pid")
        ns = "%d:%d" % (st.st_dev, st.st_ino)
    except OSError:
        ns = "0:0"
    h = 14695981039346656037
    for c in ("%s\n%s\n%s" % (host, boot, ns)).encode("utf-8", "surrogateescape"):
        h = ((h ^ c) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return "%08x" % ((h ^ (h >> 32)) & 0xFFFFFFFF)


class OutputError(OSError):
    """An output the policy refuses or a write that failed: str() is the
    one line the C tools print after their name."""

    def __init__(self, code, message, path):
        super().__init__(code, message, path)
        self.message = message

    def __str__(self):
        return self.message


def kind_name(mode):
    """What a file that is not regular is, in cdp_out.c's words."""
    return ("a FIFO" if stat.S_ISFIFO(mode) else "a character device" if stat.S_ISCHR(mode)
            else "a block device" if stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode)
            else "a directory" if stat.S_ISDIR(mode) else "not a regular file")


def kept_kind(path):
    """"a cdpool checkpoint" or "an LMDB database file" for a regular file
    of a kind the policy keeps (kept_kind() of cdp_out.c: the checkpoint
    magic; LMDB's magic at the start of lock.mdb, or in a meta page of
    data.mdb), else None (also for a file that cannot be read)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        head = os.read(fd, 20)
    except OSError:
        return None
    finally:
        os.close(fd)
    if head.startswith(CKPT_MAGIC):
        return "a cdpool checkpoint"
    if len(head) < 20:
        return None
    m0, = struct.unpack("=I", head[:4])
    pflags, = struct.unpack("=H", head[10:12])
    m16, = struct.unpack("=I", head[16:20])
    if m0 == _LMDB_MAGIC or (m16 == _LMDB_MAGIC and pflags & 0x08):
        return "an LMDB database file"
    return None


def resolve(path):
    """path with every symbolic link of its last component followed (the
    final target may not exist: a dangling link creates its target);
    OutputError ELOOP after 40 links."""
    cur = path
    for _ in range(40):
        try:
            if not stat.S_ISLNK(os.lstat(cur).st_mode):
                return cur
        except FileNotFoundError:
            return cur
        link = os.readlink(cur)
        cur = link if os.path.isabs(link) else os.path.join(os.path.dirname(cur), link)
    raise OutputError(errno.ELOOP, "cannot write '%s': %s" % (path, os.strerror(errno.ELOOP)),
                      path)


def _identity(path):
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def check(path, inputs=(), replace_ckpt=None):
    """Raises OutputError when path may not be written (see the top of
    this file). inputs: (path, what) pairs of the files the run reads,
    what as the message names it ("the state dict 'x.pth'"). replace_ckpt:
    a function of the target's path, True when this writer may replace
    that checkpoint (None: none)."""
    if not path:
        raise OutputError(errno.ENOENT, "cannot create '': %s" % os.strerror(errno.ENOENT), path)
    # GDAL's names (/vsimem/, /vsizip/), as cdp_out_vsi refuses them: else
    # "No such file or directory", as if a folder were missing
    if re.match(r"/vsi[a-z0-9_]+/", path):
        raise OutputError(errno.EINVAL, "refusing to write '%s': GDAL virtual file systems "
                          "(/vsi...) are not supported for outputs" % path, path)
    me = _identity(path)
    for src, what in inputs:
        if (me is not None and me == _identity(src)) or \
                os.path.abspath(path) == os.path.abspath(src):
            raise OutputError(errno.EEXIST, "refusing to write '%s': it is %s" % (path, what),
                              path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        target = resolve(path)
        folder = os.path.dirname(target) or "."
        try:
            fst = os.stat(folder)
            code = 0 if stat.S_ISDIR(fst.st_mode) else errno.ENOTDIR
        except OSError as e:
            code = e.errno
        if code:
            raise OutputError(code, "cannot create '%s': %s" % (path, os.strerror(code)),
                              path) from None
        return
    except OSError as e:
        raise OutputError(e.errno, "cannot write '%s': %s" % (path, e.strerror), path) from None
    if not stat.S_ISREG(st.st_mode):
        raise OutputError(errno.EINVAL, "refusing to write '%s': it is %s, not a regular file"
                          % (path, kind_name(st.st_mode)), path)
    kept = kept_kind(path)
    if kept and not (kept == "a cdpool checkpoint" and replace_ckpt and replace_ckpt(path)):
        raise OutputError(errno.EEXIST, "refusing to replace '%s': it is %s" % (path, kept), path)


def _fsync_dir(folder):
    fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    except OSError as e:
        if e.errno != errno.EINVAL:
            raise
    finally:
        os.close(fd)


def _keep_owner_mode(fd, target):
    """A regular file that the temporary replaces keeps its mode, and its
    owner and group where this process may give them (root; a group of
    the caller's), as keep_owner_mode() of cdp_out.c and sed -i do: a
    private 0600 file stays private. Best effort. A set-user or set-group
    bit is kept only with the owner and group it was for."""
    try:
        st = os.stat(target)
    except OSError:
        return
    if not stat.S_ISREG(st.st_mode):
        return
    mode = st.st_mode & 0o7777
    if st.st_uid != os.geteuid() or st.st_gid != os.getegid():
        try:
            os.fchown(fd, st.st_uid, st.st_gid)
        except OSError:
            try:
                os.fchown(fd, -1, st.st_gid)     # else the caller's group
            except OSError:
                pass
            mode &= ~(stat.S_ISUID | stat.S_ISGID)
    try:
        os.fchmod(fd, mode)
    except OSError:
        pass                                     # the umask's mode it stays


def write(path, data, inputs=(), replace_ckpt=None):
    """check(path, inputs, replace_ckpt), then data (bytes) to path through
    a temporary beside the final target, fsynced and renamed as
    cdp_out_commit does with CDP_OUT_SYNC. OutputError "cannot write
    'x': No space left on device" and the like on failure, the temporary
    removed."""
    check(path, inputs, replace_ckpt)
    target = resolve(path)
    folder, name = os.path.split(target)
    folder = folder or "."
    tmp = fd = None
    why = "create"
    try:
        for _ in range(100):
            tmp = os.path.join(folder, ".%s%s%d-%s.%s" % (
                name[:_NAME_KEEP], _TAG, os.getpid(), where_mark(),
                "".join(random.choice(string.ascii_letters + string.digits) for _ in range(6))))
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL |
                             getattr(os, "O_CLOEXEC", 0), 0o666)
                break
            except FileExistsError:
                tmp = None
        if fd is None:
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST))
        _keep_owner_mode(fd, target)
        why = "write"
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
        os.close(fd)
        fd = None
        os.rename(tmp, target)
        tmp = None
        _fsync_dir(folder)
    except OSError as e:
        if isinstance(e, OutputError):
            raise
        raise OutputError(e.errno or errno.EIO, "cannot %s '%s': %s" % (
            why, path, e.strerror or e), path) from None
    finally:
        if fd is not None:
            os.close(fd)
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
