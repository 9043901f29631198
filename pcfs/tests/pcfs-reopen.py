#!/usr/bin/env python3
"""pcfs-reopen.py MOUNT - an inode whose descriptor pcfs closed (its LRU of
inode descriptors, fds.c) is reopened by file handle, so it is still the
same file after its directory is renamed and another file takes its old
path: a reopen by path would find the new one.

MOUNT/copy must hold more files than pcfs keeps descriptors for (walking
them closes the descriptors of d and d/f).  The kernel keeps the inodes of
d and d/f (O_PATH descriptors here); once its entry and attribute
timeouts (1 s) have run out, it asks pcfs about them by inode, not by path:
an OPEN of f through /proc/self/fd, a LOOKUP of "f" in d's inode, and a
GETATTR of d."""
import os
import sys
import time

mnt = sys.argv[1]
os.mkdir(f"{mnt}/d")
with open(f"{mnt}/d/f", "w") as f:
    f.write("old\n")
d_ino = os.stat(f"{mnt}/d").st_ino
fd = os.open(f"{mnt}/d/f", os.O_PATH)
dfd = os.open(f"{mnt}/d", os.O_PATH)

time.sleep(1.1)  # so that the walk's lookups reach pcfs, past the kernel's cache
for root, dirs, files in os.walk(f"{mnt}/copy"):
    for name in files + dirs:
        os.lstat(os.path.join(root, name))

os.rename(f"{mnt}/d", f"{mnt}/e")
os.mkdir(f"{mnt}/d")
with open(f"{mnt}/d/f", "w") as f:
    f.write("new\n")
time.sleep(1.1)

with open(f"/proc/self/fd/{fd}") as f:
    got = f.read()
if got != "old\n":
    sys.exit(f"the O_PATH descriptor of d/f reads {got!r}, want 'old' (the file, not its old path)")
g = os.open("f", os.O_RDONLY, dir_fd=dfd)
got = os.read(g, 100).decode()
os.close(g)
if got != "old\n":
    sys.exit(f"f in the renamed directory reads {got!r}, want 'old'")
if os.fstat(dfd).st_ino != d_ino:
    sys.exit("the renamed directory's inode changed")
print("reopen by handle: the renamed directory and its file are the right ones")
