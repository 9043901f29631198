#!/usr/bin/env bash
# mmap.sh - mappings of files on a pcfs mount (every file is FOPEN_DIRECT_IO):
#   - MAP_PRIVATE reads the file's data, cached data not yet written too;
#   - MAP_SHARED: where pcfs could grant FUSE_DIRECT_IO_ALLOW_MMAP
#     (shared_mmap 1 in .pcfs-stats: libfuse 3.17.1 or later, kernel 6.6 or
#     later), stores through the mapping reach read(2) and the backing file
#     after msync, and write(2)s reach the mapping; elsewhere (libfuse 3.14)
#     mmap fails cleanly with ENODEV, read-only mappings too.
. "$(dirname "$0")/lib.sh"
need_fuse
need_cmd python3
setup_scratch pcfs-mmap
pcfs_mount "$T/back" "$T/mnt"
shared=$(stat_field "$T/mnt" shared_mmap)
python3 - "$T/mnt/f" "$shared" <<'EOF' || fail "mmap checks"
import errno, mmap, os, sys
path, shared = sys.argv[1], sys.argv[2] == "1"
data = os.urandom(3 * 4096 + 100)
with open(path, "wb") as f:
    f.write(data)
fd = os.open(path, os.O_RDWR)
m = mmap.mmap(fd, len(data), flags=mmap.MAP_PRIVATE)
assert m[:] == data, "MAP_PRIVATE does not read the file's data"
m[0:4] = b"priv"  # private: never reaches the file
m.close()
assert os.pread(fd, 4, 0) == data[:4], "a MAP_PRIVATE store reached the file"
print("MAP_PRIVATE: reads the data, stores stay private")
for prot in (mmap.PROT_READ, mmap.PROT_READ | mmap.PROT_WRITE):
    try:
        m = mmap.mmap(fd, len(data), flags=mmap.MAP_SHARED, prot=prot)
    except OSError as e:
        assert not shared, f"MAP_SHARED failed ({e}) although shared_mmap is 1"
        assert e.errno == errno.ENODEV, f"MAP_SHARED failed with {e}, want ENODEV"
        continue
    assert shared, "MAP_SHARED worked although pcfs did not grant FUSE_DIRECT_IO_ALLOW_MMAP"
    assert m[:] == data, "MAP_SHARED does not read the file's data"
    if prot & mmap.PROT_WRITE:
        m[100:104] = b"mmap"
        m.flush()
        assert os.pread(fd, 4, 100) == b"mmap", "a MAP_SHARED store did not reach read(2)"
        os.pwrite(fd, b"wrtn", 200)
        assert m[200:204] == b"wrtn", "a write(2) did not reach the shared mapping"
    m.close()
if shared:
    os.fsync(fd)
    print("MAP_SHARED: coherent with read(2) and write(2)")
else:
    print("MAP_SHARED: ENODEV (libfuse cannot grant FUSE_DIRECT_IO_ALLOW_MMAP)")
os.close(fd)
EOF
pcfs_umount "$T/mnt"
if [ "$shared" = 1 ]; then
	[ "$(dd if="$T/back/f" bs=1 skip=100 count=4 status=none)" = mmap ] ||
		fail "the store through MAP_SHARED is not in the backing file"
fi
echo "mmap: ok (shared_mmap $shared)"
