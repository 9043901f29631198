# lib.sh - shared by the pcfs test scripts: a scratch directory on the
# build tree's file system (O_DIRECT works there), mounting and unmounting.
#
# Environment: PCFS (the binary), PC_TEST_DIR (scratch space).  A test
# that cannot run here (not root, no /dev/fuse, no fusermount3) exits 77,
# which ctest counts as skipped (with CI set: fails, need_fuse).

set -euo pipefail

fail() {
	echo "FAIL: $*" >&2
	exit 1
}

# skip WHY: this test cannot run here.  With CI set (as CI runs the tests)
# that is a failure: CI must test real mounts with real programs, not pass
# by skipping them (the fullfs tests do the same).
skip() {
	[ -z "${CI:-}" ] || fail "cannot run: $* (a failure with CI set)"
	echo "skipped: $*" >&2
	exit 77
}

# skip_kernel WHY: the running kernel lacks a feature the test needs (as
# its own message in the kernel log says).  Skipped with CI set too: no
# setting of the machine's can give it, and the test names it.
skip_kernel() {
	echo "skipped: this kernel: $*" >&2
	exit 77
}

need_fuse() {
	if [ "$(id -u)" -ne 0 ] || [ ! -c /dev/fuse ] || ! command -v fusermount3 >/dev/null; then
		skip "needs root, /dev/fuse and fusermount3"
	fi
}

# wait_for SECONDS CMD...: run CMD every 0.1 s until it succeeds; its last
# status.  SECONDS is how long it should take; it goes on for 60 s at least
# all the same, a bound that only catches a hang (as TU_POLL in
# tests/testutil.h: a loaded machine can hold the daemon back for seconds).
wait_for() {
	# (local names of their own: CMD may be a function that reads globals)
	local wait_for_s=$1 wait_for_i
	shift
	for ((wait_for_i = 0; wait_for_i < (wait_for_s > 60 ? wait_for_s : 60) * 10; wait_for_i++)); do
		"$@" && return 0
		sleep 0.1
	done
	"$@"
}

# need_cmd CMD...: the programs a test runs (scripts/setup.sh installs them).
need_cmd() {
	local c
	for c in "$@"; do
		command -v "$c" >/dev/null || skip "no $c"
	done
}

# T: this test's scratch directory, removed at exit (mounts first).
setup_scratch() {
	local name=$1
	T=$(mktemp -d "${PC_TEST_DIR:-/tmp}/$name.XXXXXX")
	MOUNTS=()
	LATE_MOUNTS=() # file systems under the pcfs mounts: unmounted after them
	trap cleanup EXIT
}

# mounted DIR: DIR is in the mount table.  Not mountpoint(1), which
# stats DIR: a mount whose daemon died answers ENOTCONN, so mountpoint
# says no and the mount (and the scratch directory under it) stayed.
mounted() {
	awk -v m="$(realpath -m "$1")" '$2 == m { found = 1 } END { exit !found }' /proc/self/mounts
}

cleanup() {
	local m
	for m in "${MOUNTS[@]}"; do
		mounted "$m" && fusermount3 -u "$m" 2>/dev/null || true
		mounted "$m" && umount -l "$m" 2>/dev/null || true
	done
	for m in "${LATE_MOUNTS[@]}"; do
		mounted "$m" && umount -l "$m" 2>/dev/null || true
	done
	rm -rf "$T"
}

# pcfs_mount BACKING MOUNTPOINT [pcfs options...]; PCFS_WRAP: a command
# (array) to run pcfs under, e.g. (prlimit --nofile=256:256).
PCFS_WRAP=()
pcfs_mount() {
	local b=$1 m=$2
	shift 2
	mkdir -p "$b" "$m"
	"${PCFS_WRAP[@]}" "$PCFS" "$@" "$b" "$m" || fail "pcfs $* $b $m exited $?"
	MOUNTS+=("$m")
	mountpoint -q "$m" || fail "$m is not mounted"
}

pcfs_umount() {
	fusermount3 -u "$1" || fail "fusermount3 -u $1"
	# The daemon writes everything back after the unmount: wait for it.
	wait_for 10 daemon_gone "$1" || fail "pcfs daemon of $1 still running after unmount"
}

daemon_gone() {
	! pgrep -f "pcfs.* $1\$" >/dev/null
}

# stat_field MOUNTPOINT NAME: a counter from .pcfs-stats.
stat_field() {
	awk -v k="$2" '$1 == k { print $2 }' "$1/.pcfs-stats"
}
