#!/usr/bin/env bash
# flags.sh - what programs ask for reaches pagecache as it should, seen in
# the cache's own counters (.pcfs-stats), each against a buffered write
# that shows the difference:
#   - a buffered 1 MiB write leaves 1 MiB dirty and writes nothing;
#   - O_DSYNC, O_SYNC opens and RWF_DSYNC, RWF_SYNC writes (which the
#     kernel sends as O_DSYNC / O_SYNC in the write request) are written
#     to the device before write(2) returns: nothing left dirty (PC_DSYNC);
#   - an O_DIRECT write is written at once and leaves nothing cached
#     (PC_DIRECT);
#   - a 4 MiB write(2) arrives as 4 requests (1 MiB requests negotiated,
#     max_pages; the kernel's default would be 32 of 128 KiB).
. "$(dirname "$0")/lib.sh"
need_fuse
need_cmd python3
setup_scratch pcfs-flags
B=$T/back D=$T/mnt
pcfs_mount "$B" "$D"

python3 - "$D" <<'PY' || fail "flag mapping"
import mmap, os, sys
d = sys.argv[1]
def stats():
    return {k: int(float(v)) for k, v in (l.split() for l in open(d + "/.pcfs-stats"))}
MiB = 1 << 20
buf = mmap.mmap(-1, 4 * MiB)            # page-aligned, for O_DIRECT
buf.write(os.urandom(4 * MiB))
one = memoryview(buf)[:MiB]
def case(name, oflags, rwf=0, size=MiB):
    fd = os.open(d + "/" + name, os.O_RDWR | os.O_CREAT | oflags, 0o644)
    a = stats()
    data = memoryview(buf)[:size]
    n = os.pwritev(fd, [data], 0, rwf) if rwf else os.pwrite(fd, data, 0)
    b = stats()
    os.close(fd)
    assert n == size, (name, n)
    return {k: b[k] - a[k] for k in b}
fails = []
def check(what, ok):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok: fails.append(what)

x = case("buffered", 0)
check("buffered: 1 MiB dirty after write(2) (%d), nothing written (%d)" % (x["dirty_bytes"], x["dev_write_bytes"]),
      x["dirty_bytes"] >= MiB and x["dev_write_bytes"] == 0)
for name, of, rwf in (("o_dsync", os.O_DSYNC, 0), ("o_sync", os.O_SYNC, 0),
                      ("rwf_dsync", 0, os.RWF_DSYNC), ("rwf_sync", 0, os.RWF_SYNC)):
    x = case(name, of, rwf)
    check("%s: written at write(2) (%d bytes), nothing dirty (%d)" % (name, x["dev_write_bytes"], x["dirty_bytes"]),
          x["dev_write_bytes"] >= MiB and x["dirty_bytes"] <= 0)
x = case("o_direct", os.O_DIRECT)
check("o_direct: written at write(2) (%d bytes), nothing cached (%d more)" % (x["dev_write_bytes"], x["cached_bytes"]),
      x["dev_write_bytes"] >= MiB and x["cached_bytes"] <= 0 and x["dirty_bytes"] <= 0)
x = case("requests", 0, 0, 4 * MiB)
check("a 4 MiB write(2) came as %d FUSE write requests (4: 1 MiB each)" % x["fuse_writes"], x["fuse_writes"] == 4)
sys.exit(1 if fails else 0)
PY
pcfs_umount "$D"
echo "pcfs_flags: ok"
