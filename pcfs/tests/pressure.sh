#!/usr/bin/env bash
# pressure.sh - more concurrent reads than the cache has memory for: 64
# FUSE workers each read 1 MiB (misaligned, so each read spans two 1 MiB
# folios) from a mount with memory=4M.  A worker that pinned part of the
# cache while it waited for more made every worker wait for ever (the
# clients stuck in D state); now every read completes and returns the
# backing file's bytes.
#
# What fails the test is a hang, not slowness: every read goes to the
# device (4 MiB of cache, 64 MiB of file), so how long the run takes is
# the device's business (4 s to 25 s here, over 120 s once in CI on a
# busy disk).  The readers count the reads they complete; 90 s without
# one is a hang.  The daemon's threads are then printed (gdb) and it is
# killed, which aborts the mount's requests so that the readers (stuck
# in D state, deaf to signals) end.
. "$(dirname "$0")/lib.sh"
need_fuse
need_cmd python3
setup_scratch pcfs-pressure
B=$T/back D=$T/mnt
mkdir -p "$B"
head -c $((64 << 20)) /dev/urandom >"$B/f"
pcfs_mount "$B" "$D" -o memory=4M,threads=64

python3 - "$D/f" "$B/f" "$T/progress" >"$T/out" 2>&1 <<'PY' &
import os, sys, threading, random
mnt, back, progress = sys.argv[1], sys.argv[2], sys.argv[3]
data = open(back, "rb").read()
fd = os.open(mnt, os.O_RDONLY)
bad = []
done = [0]
lock = threading.Lock()
def reader(seed):
    r = random.Random(seed)
    for _ in range(10):
        off = r.randrange(0, 63) * 1048576 + r.randrange(1, 4096)
        got = os.pread(fd, 1048576, off)
        if got != data[off:off + 1048576]:
            bad.append((off, len(got)))
        with lock:
            done[0] += 1
def report():
    while True:
        with open(progress + ".new", "w") as f:
            f.write("%d\n" % done[0])
        os.rename(progress + ".new", progress)
        threading.Event().wait(0.5)
threading.Thread(target=report, daemon=True).start()
ts = [threading.Thread(target=reader, args=(i,)) for i in range(64)]
for t in ts: t.start()
for t in ts: t.join()
if bad:
    sys.exit("wrong or short reads (offset, length): %r" % bad[:5])
print("64 readers x 10 reads of 1 MiB on memory=4M: all complete and right")
PY
readers=$!
last=-1 still=0
while kill -0 "$readers" 2>/dev/null; do
	now=$(cat "$T/progress" 2>/dev/null || echo 0)
	if [ "$now" != "$last" ]; then
		last=$now still=0
	elif ((++still >= 900)); then
		daemon=$(pgrep -f "pcfs -o memory=4M,threads=64 $B $D\$" || true)
		[ -z "$daemon" ] || gdb -p "$daemon" -batch -ex "thread apply all bt" 2>&1 | grep -E '^(Thread|#)' | head -400 >&2 || true
		pkill -9 -f "pcfs -o memory=4M,threads=64 $B $D\$" || true
		wait "$readers" || true
		fail "64 readers of 1 MiB on memory=4M: no read completed in 90 s after $last of 640 (the mount hung)"
	fi
	sleep 0.1
done
wait "$readers" || { cat "$T/out"; fail "64 readers on memory=4M: exit $?"; }
cat "$T/out"
pcfs_umount "$D"
echo "pcfs_pressure: ok"
