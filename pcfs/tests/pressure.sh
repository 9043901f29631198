#!/usr/bin/env bash
# pressure.sh - more concurrent reads than the cache has memory for: 64
# FUSE workers each read 1 MiB (misaligned, so each read spans two 1 MiB
# folios) from a mount with memory=4M.  A worker that pinned part of the
# cache while it waited for more made every worker wait for ever (the
# clients stuck in D state); now every read completes and returns the
# backing file's bytes.  A hang (readers still running after 120 s) fails
# the test; the daemon is then killed, which aborts the mount's requests
# so that the readers (stuck in D state, deaf to timeout's signals) end.
. "$(dirname "$0")/lib.sh"
need_fuse
need_cmd python3
setup_scratch pcfs-pressure
B=$T/back D=$T/mnt
mkdir -p "$B"
head -c $((64 << 20)) /dev/urandom >"$B/f"
pcfs_mount "$B" "$D" -o memory=4M,threads=64

python3 - "$D/f" "$B/f" >"$T/out" 2>&1 <<'PY' &
import os, sys, threading, random
mnt, back = sys.argv[1], sys.argv[2]
data = open(back, "rb").read()
fd = os.open(mnt, os.O_RDONLY)
bad = []
def reader(seed):
    r = random.Random(seed)
    for _ in range(40):
        off = r.randrange(0, 63) * 1048576 + r.randrange(1, 4096)
        got = os.pread(fd, 1048576, off)
        if got != data[off:off + 1048576]:
            bad.append((off, len(got)))
ts = [threading.Thread(target=reader, args=(i,)) for i in range(64)]
for t in ts: t.start()
for t in ts: t.join()
if bad:
    sys.exit("wrong or short reads (offset, length): %r" % bad[:5])
print("64 readers x 40 reads of 1 MiB on memory=4M: all complete and right")
PY
readers=$!
for _ in $(seq 1200); do
	kill -0 "$readers" 2>/dev/null || break
	sleep 0.1
done
if kill -0 "$readers" 2>/dev/null; then
	pkill -9 -f "pcfs -o memory=4M,threads=64 $B $D\$" || true
	wait "$readers" || true
	fail "64 readers of 1 MiB on memory=4M: still reading after 120 s (the mount hung)"
fi
wait "$readers" || { cat "$T/out"; fail "64 readers on memory=4M: exit $?"; }
cat "$T/out"
pcfs_umount "$D"
echo "pcfs_pressure: ok"
