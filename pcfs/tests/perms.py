#!/usr/bin/env python3
"""perms.py RULE setup|run|state DIR - one permission rule, in DIR.

perms.sh runs each rule twice: in a directory of the backing file system
and in a pcfs mount of another, and compares the output line by line.
  setup (root):  the rule's files, owners, modes, ACLs and xattrs;
  run (a user):  the calls the rule is about, each printed with its result
                 (an errno name, a mode, data), never inode numbers or times;
  state (root):  every file under DIR afterwards: type, mode, owner, group,
                 size, data, ACLs and xattrs.
Users and group (perms.sh makes them): pcfs-u1, in the supplementary group
pcfs-g, and pcfs-u2, who is not.  The rules: create, open, truncate,
chmod, chown, setid, sticky, acl, xattr, race, quota, reserved.
"""
import errno
import grp
import os
import pwd
import stat
import subprocess
import sys
import time

RULE, ACTION, D = sys.argv[1], sys.argv[2], sys.argv[3]
U = {n: pwd.getpwnam(n) for n in ("pcfs-u1", "pcfs-u2")}
G = grp.getgrnam("pcfs-g").gr_gid
ME = pwd.getpwuid(os.getuid()).pw_name


def p(*names):
    """A path in D."""
    return os.path.join(D, *names)


def out(check, value):
    print(f"{RULE} {ME}: {check}: {value!r}")


def call(fn):
    """The call's result, or its errno's name."""
    try:
        r = fn()
        return "ok" if r is None else r
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))


def mode_of(name):
    return call(lambda: oct(os.lstat(p(name)).st_mode & 0o7777))


def owner_of(name):
    def get():
        st = os.lstat(p(name))
        return f"{pwd.getpwuid(st.st_uid).pw_name}:{grp.getgrgid(st.st_gid).gr_name}"
    return call(get)


def make(name, data=b"data\n", mode=0o644, owner="root", group=None):
    """(setup) a file of owner (a user name, or root) and group (a gid)."""
    with open(p(name), "wb") as f:
        f.write(data)
    uid = 0 if owner == "root" else U[owner].pw_uid
    os.chown(p(name), uid, group if group is not None else (0 if owner == "root" else U[owner].pw_gid))
    os.chmod(p(name), mode)


def mkdir(name, mode, owner="root", group=None):
    os.mkdir(p(name))
    uid = 0 if owner == "root" else U[owner].pw_uid
    os.chown(p(name), uid, group if group is not None else (0 if owner == "root" else U[owner].pw_gid))
    os.chmod(p(name), mode)


def setfacl(*args):
    subprocess.run(["setfacl", *args], check=True)


def try_open(name, flags, mode=0o644):
    def go():
        fd = os.open(p(name), flags, mode)
        try:
            if (flags & os.O_ACCMODE) != os.O_WRONLY:
                return os.read(fd, 64)
            return "opened"
        finally:
            os.close(fd)
    return call(go)


def append(name, data=b"more\n"):
    def go():
        with open(p(name), "ab") as f:
            f.write(data)
    return call(go)


# ------------------------------------------------------------------ rules

def setup_create():
    mkdir("open", 0o777)
    mkdir("closed", 0o755)
    mkdir("sgid", 0o2777, group=G)
    for u in U:
        mkdir(f"home-{u}", 0o700, owner=u)
    make("open/theirs", mode=0o644)
    make("open/shared", mode=0o666)


def run_create():
    os.umask(0o022)
    for d in ("open", "closed", "sgid", "home-pcfs-u1", "home-pcfs-u2"):
        n = f"{d}/f-{ME}"
        out(f"create {n}", try_open(n, os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o666))
        out(f"  mode, owner", (mode_of(n), owner_of(n)))
    for what, mk in (("mkdir", lambda n: os.mkdir(p(n), 0o777)), ("mkfifo", lambda n: os.mkfifo(p(n), 0o666)),
                     ("symlink", lambda n: os.symlink("target", p(n))),
                     ("mknod chr", lambda n: os.mknod(p(n), 0o666 | stat.S_IFCHR, os.makedev(1, 3)))):
        for d in ("open", "sgid", "closed"):
            n = f"{d}/{what.split()[0]}-{ME}"
            out(f"{what} {n}", call(lambda: mk(n)))
            out(f"  mode, owner", (mode_of(n), owner_of(n)))
    out("create 4755", try_open(f"open/suid-{ME}", os.O_CREAT | os.O_WRONLY, 0o4755))
    out("  mode", mode_of(f"open/suid-{ME}"))
    out("create 2755 in sgid dir", try_open(f"sgid/sgid-{ME}", os.O_CREAT | os.O_WRONLY, 0o2755))
    out("  mode", mode_of(f"sgid/sgid-{ME}"))
    out("O_CREAT on theirs, write", try_open("open/theirs", os.O_CREAT | os.O_WRONLY))
    out("O_CREAT on theirs, read", try_open("open/theirs", os.O_CREAT | os.O_RDONLY))
    out("O_CREAT|O_TRUNC on shared", try_open("open/shared", os.O_CREAT | os.O_WRONLY | os.O_TRUNC))
    out("O_CREAT|O_EXCL on theirs", try_open("open/theirs", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    out("hard link to theirs", call(lambda: os.link(p("open/theirs"), p(f"open/link-{ME}"))))
    out("hard link to own", call(lambda: os.link(p(f"open/f-{ME}"), p(f"open/ownlink-{ME}"))))
    out("rmdir closed", call(lambda: os.rmdir(p("closed"))))


def setup_open():
    make("u1-600", mode=0o600, owner="pcfs-u1")
    make("g-640", mode=0o640, group=G)
    make("g-060", mode=0o060, group=G)
    make("o-604", mode=0o604)
    make("o-602", mode=0o602)
    make("none-000", mode=0o000)
    mkdir("g-dir-750", 0o750, group=G)
    make("g-dir-750/in", mode=0o644)
    subprocess.run(["cp", "/bin/true", p("prog-711")], check=True)
    os.chmod(p("prog-711"), 0o711)


def run_open():
    for n in ("u1-600", "g-640", "g-060", "o-604", "o-602", "none-000", "g-dir-750/in"):
        for fl, name in ((os.O_RDONLY, "r"), (os.O_WRONLY, "w"), (os.O_RDWR, "rw")):
            out(f"open {n} {name}", try_open(n, fl))
    out("listdir g-dir-750", call(lambda: sorted(os.listdir(p("g-dir-750")))))
    out("access g-640 R", os.access(p("g-640"), os.R_OK))
    out("access o-602 W", os.access(p("o-602"), os.W_OK))
    # An execute-only program runs, and cannot be read.
    out("run prog-711", call(lambda: subprocess.run([p("prog-711")]).returncode))
    out("read prog-711", call(lambda: len(open(p("prog-711"), "rb").read())))


def setup_truncate():
    for u in U:
        make(f"own-{u}", mode=0o644, owner=u)
    make("g-664", mode=0o664, group=G)
    make("o-644", mode=0o644)
    make("o-666", mode=0o666)


def run_truncate():
    for n in (f"own-{ME}", "g-664", "o-644", "o-666"):
        out(f"truncate {n} 2", call(lambda: os.truncate(p(n), 2)))
        out(f"O_TRUNC {n}", try_open(n, os.O_WRONLY | os.O_TRUNC))
        out(f"ftruncate {n} via O_RDWR", call(lambda: os.truncate(p(n), 7)))
        out(f"  size", call(lambda: os.stat(p(n)).st_size))


def setup_chmod():
    for u in U:
        make(f"own-{u}", mode=0o644, owner=u)
        make(f"own-rootgrp-{u}", mode=0o644, owner=u, group=0)
        make(f"own-ggrp-{u}", mode=0o644, owner=u, group=G)
        mkdir(f"dir-{u}", 0o755, owner=u)
    make("root", mode=0o666)


def run_chmod():
    for n, m in ((f"own-{ME}", 0o600), (f"own-{ME}", 0o4755), (f"own-rootgrp-{ME}", 0o2755),
                 (f"own-ggrp-{ME}", 0o2755), (f"dir-{ME}", 0o3777), ("root", 0o600)):
        out(f"chmod {n} {oct(m)}", call(lambda: os.chmod(p(n), m)))
        out("  mode", mode_of(n))


def setup_chown():
    for u in U:
        make(f"own-{u}", mode=0o644, owner=u)
        make(f"suid-{u}", mode=0o6755, owner=u, group=G)
    make("root", mode=0o666)


def run_chown():
    me, other = U[ME], U["pcfs-u2" if ME == "pcfs-u1" else "pcfs-u1"]
    n = f"own-{ME}"
    out("chown to other user", call(lambda: os.chown(p(n), other.pw_uid, -1)))
    out("chgrp to pcfs-g", call(lambda: os.chown(p(n), -1, G)))
    out("chgrp to root", call(lambda: os.chown(p(n), -1, 0)))
    out("chown -1 -1", call(lambda: os.chown(p(n), -1, -1)))
    out("chgrp own group", call(lambda: os.chown(p(n), -1, me.pw_gid)))
    out("  owner", owner_of(n))
    s = f"suid-{ME}"
    out("chgrp of set-ID file", call(lambda: os.chown(p(s), -1, me.pw_gid)))
    out("  mode, owner", (mode_of(s), owner_of(s)))
    out("chown root's", call(lambda: os.chown(p("root"), me.pw_uid, -1)))


def setup_setid():
    for u in U:
        make(f"suid-{u}", mode=0o4777, group=G)        # the case, writable by all
        make(f"sgidx-{u}", mode=0o2777, group=G)       # S_ISGID with group execute
        make(f"sgid-{u}", mode=0o2767, group=G)        # S_ISGID without: a member keeps it
        make(f"trunc-{u}", mode=0o6777, group=G)
        make(f"ftrunc-{u}", mode=0o6777, group=G)
    subprocess.run(["cp", "/usr/bin/id", p("id")], check=True)
    os.chmod(p("id"), 0o4755)


def run_setid():
    for n in (f"suid-{ME}", f"sgidx-{ME}", f"sgid-{ME}"):
        out(f"append {n}", append(n))
        out("  mode", mode_of(n))
    out("O_TRUNC", try_open(f"trunc-{ME}", os.O_WRONLY | os.O_TRUNC))
    out("  mode", mode_of(f"trunc-{ME}"))
    out("truncate", call(lambda: os.truncate(p(f"ftrunc-{ME}"), 1)))
    out("  mode", mode_of(f"ftrunc-{ME}"))
    r = subprocess.run([p("id"), "-u"], capture_output=True, text=True)
    out("set-user-ID id -u", (r.returncode, r.stdout.strip() == "0"))


def setup_sticky():
    mkdir("st", 0o1777)
    for u in U:
        make(f"st/f-{u}", mode=0o666, owner=u)
        make(f"st/g-{u}", mode=0o666, owner=u)
        mkdir(f"st/d-{u}", 0o777, owner=u)
    make("st/f-root", mode=0o666)
    mkdir("plain", 0o777)
    make("plain/f-root", mode=0o644)


def run_sticky():
    other = "pcfs-u2" if ME == "pcfs-u1" else "pcfs-u1"
    out("write other's", append(f"st/f-{other}"))
    out("unlink other's", call(lambda: os.unlink(p(f"st/g-{other}"))))
    out("unlink root's", call(lambda: os.unlink(p("st/f-root"))))
    out("rmdir other's", call(lambda: os.rmdir(p(f"st/d-{other}"))))
    out("unlink own", call(lambda: os.unlink(p(f"st/g-{ME}"))))
    out("rmdir own", call(lambda: os.rmdir(p(f"st/d-{ME}"))))
    out("rename other's away", call(lambda: os.rename(p(f"st/f-{other}"), p(f"st/mine-{ME}"))))
    out("create over other's", try_open(f"st/f-{other}", os.O_CREAT | os.O_WRONLY))
    out("unlink in plain", call(lambda: os.unlink(p("plain/f-root"))) if ME == "pcfs-u2" else "skip")


def setup_acl():
    make("deny-u1", mode=0o644)
    setfacl("-m", "u:pcfs-u1:---", p("deny-u1"))
    make("allow-u2", mode=0o600)
    setfacl("-m", "u:pcfs-u2:rw-,m::rw-", p("allow-u2"))
    make("group-g", mode=0o640)
    setfacl("-m", "g:pcfs-g:r--", p("group-g"))
    make("mask", mode=0o600)
    setfacl("-m", "u:pcfs-u1:rw-,u:pcfs-u2:rw-,m::r--", p("mask"))
    mkdir("dflt", 0o755)
    setfacl("-m", "u:pcfs-u1:rwx,u:pcfs-u2:rwx", p("dflt"))
    setfacl("-d", "-m", "u::rwx,g::r-x,o::---,u:pcfs-u1:rw-", p("dflt"))
    mkdir("denydir", 0o777)
    setfacl("-m", "u:pcfs-u2:r-x", p("denydir"))


def acl_of(name, kind="access"):
    return call(lambda: os.getxattr(p(name), f"system.posix_acl_{kind}").hex())


def run_acl():
    for n in ("deny-u1", "allow-u2", "group-g", "mask"):
        out(f"read {n}", try_open(n, os.O_RDONLY))
        out(f"write {n}", try_open(n, os.O_WRONLY))
    os.umask(0o022)
    n = f"dflt/f-{ME}"
    out("create in default-ACL dir", try_open(n, os.O_CREAT | os.O_WRONLY, 0o666))
    out("  mode, acl", (mode_of(n), acl_of(n)))
    out("mkdir in default-ACL dir", call(lambda: os.mkdir(p(f"dflt/d-{ME}"), 0o777)))
    out("  mode, acls", (mode_of(f"dflt/d-{ME}"), acl_of(f"dflt/d-{ME}"), acl_of(f"dflt/d-{ME}", "default")))
    out("create in denydir", try_open(f"denydir/f-{ME}", os.O_CREAT | os.O_WRONLY))
    own_acl = call(lambda: os.getxattr(p("deny-u1"), "system.posix_acl_access"))
    out("set ACL of own file", call(lambda: os.setxattr(p(n), "system.posix_acl_access", own_acl)))
    out("  mode, acl", (mode_of(n), acl_of(n)))
    out("set ACL of root's file", call(lambda: os.setxattr(p("group-g"), "system.posix_acl_access", own_acl)))
    out("remove ACL of root's file", call(lambda: os.removexattr(p("allow-u2"), "system.posix_acl_access")))
    out("chmod own file, acl after", (call(lambda: os.chmod(p(n), 0o640)), mode_of(n), acl_of(n)))


def setup_xattr():
    for u in U:
        make(f"own-{u}", mode=0o644, owner=u)
        os.setxattr(p(f"own-{u}"), "user.a", b"1")
        os.setxattr(p(f"own-{u}"), "trusted.t", b"secret")
    make("root", mode=0o644)
    os.setxattr(p("root"), "user.b", b"2")
    os.setxattr(p("root"), "trusted.t", b"secret")
    make("bare", mode=0o644)    # no xattr at all: an empty list


def run_xattr():
    n = f"own-{ME}"
    for f in (n, "root"):
        out(f"list {f}", call(lambda: sorted(os.listxattr(p(f)))))
        out(f"get trusted.t {f}", call(lambda: os.getxattr(p(f), "trusted.t")))
        out(f"set trusted.n {f}", call(lambda: os.setxattr(p(f), "trusted.n", b"x")))
        out(f"remove trusted.t {f}", call(lambda: os.removexattr(p(f), "trusted.t")))
        out(f"set user.k {f}", call(lambda: os.setxattr(p(f), "user.k", b"v")))
        out(f"remove user.a {f}", call(lambda: os.removexattr(p(f), "user.a")))
        out(f"get user.k {f}", call(lambda: os.getxattr(p(f), "user.k")))
    out("list bare", call(lambda: sorted(os.listxattr(p("bare")))))
    # The size of the list (0-size query) matches the names given.
    out("list size", call(lambda: len(b"".join(x.encode() + b"\0" for x in os.listxattr(p(n))))))


def setup_race():
    mkdir("r", 0o777)


def run_race():
    """A name the kernel looked up and found missing (a negative entry it
    keeps for a second), then made on the backing file system directly:
    the kernel sends a create, and pcfs finds the file there.  It must
    open it as open(2) would for the caller (PERMS_BACKING: the backing
    directory of D; D itself for the reference run)."""
    back = os.environ["PERMS_BACKING"]
    for n, mode, flags in (("ro", 0o444, os.O_WRONLY), ("rw", 0o644, os.O_WRONLY | os.O_TRUNC),
                           ("none", 0o000, os.O_RDONLY), ("dir", None, os.O_WRONLY)):
        name = f"r/{n}-{ME}"
        out(f"lookup {name}", call(lambda: os.stat(p(name)) and None))
        if mode is None:
            os.mkdir(os.path.join(back, name))
        else:
            with open(os.path.join(back, name), "wb") as f:
                f.write(b"there\n")
            os.chmod(os.path.join(back, name), mode)
        out(f"O_CREAT {name} {oct(mode or 0)}", try_open(name, flags | os.O_CREAT, 0o666))
    # Another user's file, appeared the same way: pcfs-u1 makes it for both.
    if ME == "pcfs-u1":
        for n in ("theirs-ro", "theirs-rw"):
            with open(os.path.join(back, f"r/{n}"), "wb") as f:
                f.write(b"u1's\n")
            os.chmod(os.path.join(back, f"r/{n}"), 0o644 if n == "theirs-ro" else 0o666)
    else:
        out("O_CREAT theirs-ro", try_open("r/theirs-ro", os.O_CREAT | os.O_WRONLY))
        out("O_CREAT|O_EXCL theirs-rw", try_open("r/theirs-rw", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        out("O_CREAT theirs-rw", try_open("r/theirs-rw", os.O_CREAT | os.O_RDWR))
    time.sleep(1.2)  # the kernel's negative entries expire: state sees the files


def fill(name, mib):
    """Write mib MiB to a new file, fsync and close it: the first error
    (from write() on a file system, from fsync() or close() through the
    cache, which writes back later: which call gave it is not compared).
    The file is removed then, so that the states compare."""
    first = None
    try:
        fd = os.open(p(name), os.O_CREAT | os.O_WRONLY, 0o644)
        try:
            for _ in range(mib):
                os.write(fd, b"q" * (1 << 20))
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as e:
        first = errno.errorcode.get(e.errno)
    out(f"first error writing {mib} MiB, fsync, close", first)
    out("owner", owner_of(name))
    out("unlink", call(lambda: os.unlink(p(name))))


def setup_quota():
    mkdir("q", 0o777)


def run_quota():
    """pcfs-u1 may use 512 KiB (perms.sh): EDQUOT, as its files are its
    own and the daemon has no CAP_SYS_RESOURCE."""
    if ME == "pcfs-u1":
        fill("q/big", 2)


def setup_reserved():
    mkdir("r", 0o777)


def run_reserved():
    """Half the file system is reserved, for uid 65534 only (perms.sh):
    ENOSPC for the users, as write-back has no CAP_SYS_RESOURCE."""
    if ME == "pcfs-u1":
        fill("r/big", 40)


# ------------------------------------------------------------------ state

def state():
    for root, dirs, files in os.walk(D):
        dirs.sort()
        for name in sorted(dirs + files):
            path = os.path.join(root, name)
            rel = os.path.relpath(path, D)
            st = os.lstat(path)
            line = [rel, stat.filemode(st.st_mode), oct(st.st_mode & 0o7777), owner_of(rel)]
            if stat.S_ISREG(st.st_mode):
                with open(path, "rb") as f:
                    data = f.read(4096)
                line += [st.st_size, data[:32]]
            if not stat.S_ISLNK(st.st_mode):
                line.append(sorted((x, os.getxattr(path, x).hex()) for x in os.listxattr(path)))
            print(*line)


if ACTION == "setup":
    globals()["setup_" + RULE]()
elif ACTION == "run":
    globals()["run_" + RULE]()
else:
    state()
