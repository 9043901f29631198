#!/usr/bin/env python3
"""pcfs-reuse.py MOUNT BACKING - an inode number the backing file system
reuses while pcfs still knows the deleted file's inode (the kernel holds a
lookup on it) with its descriptor closed by the LRU: a lookup of the new
file must give the new file an inode of its own.  Taken as the old one,
the new file was reopened later by the deleted file's handle: ESTALE for
a live file.

MOUNT/copy must hold more files than pcfs keeps descriptors for (walking
them closes the old descriptors) and more than pagecache keeps closed.  The file is deleted in BACKING itself,
so that the kernel keeps its lookup and pcfs its inode."""
import os
import sys
import time

mnt, back = sys.argv[1], sys.argv[2]

def walk_copy():
    """Closes pcfs's descriptors of inodes not in use (its LRU), and by
    reading 400 files pushes closed files out of pagecache's keep of
    recently closed files, which holds their backing files open."""
    time.sleep(1.1)  # past the kernel's entry and attribute timeouts
    reads = 0
    for root, dirs, files in os.walk(f"{mnt}/copy"):
        for name in files + dirs:
            p = os.path.join(root, name)
            os.lstat(p)
            if reads < 400 and name.startswith("f"):
                with open(p, "rb") as f:
                    f.read()
                reads += 1

def deleted_and_reused(attempt):
    """Deletes a file pcfs knows (the kernel holding its lookup, pcfs
    having closed its descriptors) and creates files beside it in BACKING
    until one takes its inode number: (the held lookup, the number, that
    file's name under r/), the name None if none took it."""
    a = f"r/a{attempt}"
    with open(f"{mnt}/{a}", "w") as f:
        f.write("old file\n")
    held = os.open(f"{mnt}/{a}", os.O_PATH)  # the kernel keeps its lookup
    old_ino = os.stat(f"{back}/{a}").st_ino
    os.close(os.open(f"{mnt}/{a}", os.O_RDONLY))  # opened once through pagecache
    walk_copy()                               # pcfs and pagecache close its descriptors
    os.unlink(f"{back}/{a}")
    os.sync()  # ext4 reuses a freed inode number once the unlink is committed
    for i in range(200):                      # ext4 and XFS soon reuse a freed number
        n = f"r/n{attempt}-{i}"
        with open(f"{back}/{n}", "w") as f:
            f.write("new file\n")
        if os.stat(f"{back}/{n}").st_ino == old_ino:
            return held, old_ino, n[2:]
    return held, old_ino, None

# Another process creating files on the same file system (other tests run
# beside this one) may take the freed number first: a few attempts.
os.mkdir(f"{mnt}/r")
name = None
for attempt in range(4):
    held, old_ino, name = deleted_and_reused(attempt)
    if name is not None:
        break
    os.close(held)
    print(f"attempt {attempt}: inode {old_ino} not reused in 200 creates (taken by another process?)")
if name is None:
    sys.exit("the file system did not reuse a freed inode number in 4 attempts of 200 creates: cannot test")

with open(f"{mnt}/r/{name}") as f:        # the lookup that finds the old inode
    got = f.read()
if got != "new file\n":
    sys.exit(f"r/{name} reads {got!r} at first, want 'new file'")
# Its node, held: an open through /proc/self/fd reaches pcfs as an OPEN
# of that node, with no LOOKUP that would hand pcfs a fresh descriptor.
node = os.open(f"{mnt}/r/{name}", os.O_PATH)
walk_copy()                               # closes the new file's descriptor too
try:
    with open(f"/proc/self/fd/{node}") as f:  # reopened by handle
        got = f.read()
except OSError as e:
    sys.exit(f"r/{name} after its descriptor was closed: {e} (reopened by the deleted file's handle)")
if got != "new file\n":
    sys.exit(f"r/{name} reads {got!r} after a reopen, want 'new file'")
os.close(held)
os.close(node)
print(f"inode {old_ino} reused by r/{name}: its own inode, right after a reopen")
