#!/usr/bin/env python3
"""meta.py DIR - metadata and open-file behaviour, run in DIR.

Prints one line per check: what the calls returned (data, sizes, modes,
errors), never inode numbers or times, so that the output of a run in a
pcfs mount can be compared line by line with a run on the backing file
system (meta.sh does).  The checks:
  - a file unlinked while open keeps working until its last close;
  - a file renamed while open keeps its data, and its new name sees it;
  - a rename over a file that is open leaves that handle on the old file;
  - hard links: a write through one name is read through the other while
    both are open, and the data outlives the first name;
  - xattrs: set, get, list, replace, remove (user namespace);
  - fifos (mkfifo and mknod): data passes from a writer to a reader;
  - renameat2 RENAME_NOREPLACE (EEXIST) and RENAME_EXCHANGE (swap);
  - symlink and readlink; chmod; utime with given times;
  - O_RDONLY | O_TRUNC truncates (as Linux's file systems do);
  - the caller's umask, not the daemon's, decides a new file's mode.
"""
import ctypes
import errno
import os
import stat
import sys
import threading

D = sys.argv[1]
libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD = -100
RENAME_NOREPLACE, RENAME_EXCHANGE = 1, 2


def p(name):
    return os.path.join(D, name)


def out(check, value):
    print(f"{check}: {value!r}")


def err_name(fn):
    try:
        fn()
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))


def read_file(name):
    with open(p(name), "rb") as f:
        return f.read()


def write_file(name, data):
    with open(p(name), "wb") as f:
        f.write(data)


def renameat2(a, b, flags):
    r = libc.renameat2(AT_FDCWD, p(a).encode(), AT_FDCWD, p(b).encode(), flags)
    return "ok" if r == 0 else errno.errorcode.get(ctypes.get_errno(), "?")


def unlinked_while_open():
    fd = os.open(p("ul"), os.O_RDWR | os.O_CREAT, 0o644)
    os.write(fd, b"one")
    os.unlink(p("ul"))
    os.pwrite(fd, b"two", 3)
    out("unlinked: read", os.pread(fd, 16, 0))
    out("unlinked: nlink", os.fstat(fd).st_nlink)
    out("unlinked: size", os.fstat(fd).st_size)
    os.fsync(fd)
    os.close(fd)
    out("unlinked: name", os.path.exists(p("ul")))


def renamed_while_open():
    fd = os.open(p("rn1"), os.O_RDWR | os.O_CREAT, 0o644)
    os.write(fd, b"xyz")
    os.rename(p("rn1"), p("rn2"))
    os.pwrite(fd, b"123", 3)
    out("renamed: new name before close", read_file("rn2"))
    os.close(fd)
    out("renamed: new name", read_file("rn2"))
    out("renamed: old name", os.path.exists(p("rn1")))


def renamed_over_open():
    write_file("ro1", b"first")
    write_file("ro2", b"second")
    fd = os.open(p("ro2"), os.O_RDWR)
    os.rename(p("ro1"), p("ro2"))
    os.pwrite(fd, b"SEC", 0)
    out("over open: old handle", os.pread(fd, 16, 0))
    os.close(fd)
    out("over open: name", read_file("ro2"))


def hard_links():
    write_file("h1", b"")
    os.link(p("h1"), p("h2"))
    a = os.open(p("h1"), os.O_RDWR)
    b = os.open(p("h2"), os.O_RDONLY)
    os.pwrite(a, b"linked data", 0)
    out("links: read through the other", os.pread(b, 32, 0))
    out("links: nlink", os.fstat(a).st_nlink)
    os.close(a)
    os.unlink(p("h1"))
    out("links: after unlink", os.pread(b, 32, 0))
    os.close(b)
    out("links: nlink after", os.stat(p("h2")).st_nlink)


def xattrs():
    write_file("xa", b"x")
    f = p("xa")
    os.setxattr(f, "user.k", b"v1")
    os.setxattr(f, "user.k2", b"")
    out("xattr: get", os.getxattr(f, "user.k"))
    out("xattr: list", sorted(n for n in os.listxattr(f) if n.startswith("user.")))
    out("xattr: create existing",
        err_name(lambda: os.setxattr(f, "user.k", b"v", os.XATTR_CREATE)))
    os.setxattr(f, "user.k", b"v2", os.XATTR_REPLACE)
    out("xattr: replaced", os.getxattr(f, "user.k"))
    out("xattr: replace missing",
        err_name(lambda: os.setxattr(f, "user.none", b"v", os.XATTR_REPLACE)))
    os.removexattr(f, "user.k")
    out("xattr: removed", err_name(lambda: os.getxattr(f, "user.k")))
    out("xattr: empty value", os.getxattr(f, "user.k2"))


def fifo(name, make):
    make(p(name))
    out(f"{name}: type", stat.S_ISFIFO(os.lstat(p(name)).st_mode))
    got = []

    def reader():
        with open(p(name), "rb") as r:
            got.append(r.read())

    t = threading.Thread(target=reader)
    t.start()
    with open(p(name), "wb") as w:
        w.write(b"through the fifo")
    t.join(10)
    out(f"{name}: data", got)
    os.unlink(p(name))


def rename_flags():
    write_file("f1", b"one")
    write_file("f2", b"two")
    out("noreplace onto existing", renameat2("f1", "f2", RENAME_NOREPLACE))
    out("noreplace onto new", renameat2("f1", "f3", RENAME_NOREPLACE))
    out("exchange", renameat2("f3", "f2", RENAME_EXCHANGE))
    out("exchanged", (read_file("f2"), read_file("f3")))
    out("exchange with missing", renameat2("f2", "missing", RENAME_EXCHANGE))


def links_modes_times():
    os.symlink("target/of/link", p("sl"))
    out("readlink", os.readlink(p("sl")))
    out("symlink type", stat.S_ISLNK(os.lstat(p("sl")).st_mode))
    write_file("cm", b"c")
    os.chmod(p("cm"), 0o640)
    out("chmod", oct(os.stat(p("cm")).st_mode & 0o7777))
    os.utime(p("cm"), ns=(1_000_000_000_123, 2_000_000_000_456))
    st = os.stat(p("cm"))
    out("utime", (st.st_atime_ns, st.st_mtime_ns))


def rdonly_trunc():
    write_file("tr", b"some data")
    fd = os.open(p("tr"), os.O_RDONLY | os.O_TRUNC)
    out("O_RDONLY|O_TRUNC size", os.fstat(fd).st_size)
    out("O_RDONLY|O_TRUNC write", err_name(lambda: os.write(fd, b"x")))
    os.close(fd)
    out("O_RDONLY|O_TRUNC after", read_file("tr"))


def umask_modes():
    old = os.umask(0o002)
    try:
        os.close(os.open(p("um"), os.O_CREAT | os.O_WRONLY, 0o666))
        os.mkdir(p("umd"), 0o777)
        os.mkfifo(p("umf"), 0o666)
    finally:
        os.umask(old)
    out("umask file", oct(os.stat(p("um")).st_mode & 0o777))
    out("umask dir", oct(os.stat(p("umd")).st_mode & 0o777))
    out("umask fifo", oct(os.stat(p("umf")).st_mode & 0o777))


unlinked_while_open()
renamed_while_open()
renamed_over_open()
hard_links()
xattrs()
fifo("fifo", lambda n: os.mkfifo(n, 0o644))
fifo("mknod", lambda n: os.mknod(n, 0o644 | stat.S_IFIFO))
rename_flags()
links_modes_times()
rdonly_trunc()
umask_modes()
