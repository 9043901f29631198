#!/usr/bin/env bash
# userfds.sh - limits per user (-o user_fd_limit, fds.c), pcfs as root with
# allow_other, two unprivileged users A and B (made with useradd if
# missing):
#   - A opens directories and files and holds them: exactly user_fd_limit
#     succeed, the next open, opendir and create get EMFILE (and the
#     create leaves no file behind);
#   - meanwhile B opens files and directories, and root (never capped)
#     opens more than the limit;
#   - .pcfs-stats shows user_fds.UID for A (the limit) and B (what B
#     holds), user_fd_refusals, and nothing for A once A has closed all;
#     then A can open again;
#   - the default limit (a sixteenth of RLIMIT_NOFILE, at least 64), and a
#     bad value refused before mounting.
. "$(dirname "$0")/lib.sh"
need_fuse
need_cmd python3 setpriv useradd
setup_scratch pcfs-userfds
B=$T/back M=$T/mnt LIMIT=20

for u in pcfs-fds-a pcfs-fds-b; do
	id -u "$u" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$u" ||
		fail "useradd $u"
done
UA=$(id -u pcfs-fds-a) UB=$(id -u pcfs-fds-b)
# A python3 the users may run (root's may be in a directory of root's own).
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)
# as USER CMD...: CMD as USER (own group only) in $M, reached as root
# first: the users need no way through $T's parents.
as() {
	local u=$1
	shift
	(cd "$M" && setpriv --reuid="$(id -u "$u")" --regid="$(id -g "$u")" --clear-groups -- "$@")
}

mkdir -p "$B/pub"
chmod 1777 "$B/pub"
for i in 0 1 2 3 4; do
	echo "file $i" >"$B/f$i"
	mkdir "$B/d$i"
done
pcfs_mount "$B" "$M" -o allow_other,user_fd_limit=$LIMIT
[ "$(stat_field "$M" user_fd_limit)" = $LIMIT ] || fail "user_fd_limit '$(stat_field "$M" user_fd_limit)', want $LIMIT"

# HOLD NDIRS MAXFILES, in the mount: open NDIRS directories, then files
# until MAXFILES or an error; then try a create and an opendir; say what
# happened (one line on stdout); hold all until the file "go" exists.
HOLD='
import errno, os, sys, time
mnt, ndirs, maxfiles = ".", int(sys.argv[1]), int(sys.argv[2])
fds, err = [], "none"
for i in range(ndirs):
    fds.append(os.open("%s/d%d" % (mnt, i % 5), os.O_RDONLY | os.O_DIRECTORY))
for i in range(maxfiles):
    try:
        fds.append(os.open("%s/f%d" % (mnt, i % 5), os.O_RDONLY))
    except OSError as e:
        err = errno.errorcode[e.errno]
        break
def attempt(path, flags):
    try:
        fds.append(os.open(path, flags, 0o644))
        return "ok"
    except OSError as e:
        return errno.errorcode[e.errno]
create = attempt("%s/pub/new-%d" % (mnt, os.getuid()), os.O_WRONLY | os.O_CREAT | os.O_EXCL)
opendir = attempt("%s/d0" % mnt, os.O_RDONLY | os.O_DIRECTORY)
print("opened %d then %s, create %s, opendir %s" % (len(fds) - (create == "ok") - (opendir == "ok"), err, create, opendir),
      flush=True)
while not os.path.exists(mnt + "/go"):
    time.sleep(0.1)
'
as pcfs-fds-a "$PY" -I -c "$HOLD" 3 1000 >"$T/a" &
pa=$!
as pcfs-fds-b "$PY" -I -c "$HOLD" 1 3 >"$T/b" &
pb=$!
wait_for 30 test -s "$T/a" || fail "user A's opens did not finish"
wait_for 30 test -s "$T/b" || fail "user B's opens did not finish"
want="opened $LIMIT then EMFILE, create EMFILE, opendir EMFILE"
[ "$(cat "$T/a")" = "$want" ] || fail "user A: '$(cat "$T/a")', want '$want'"
[ ! -e "$B/pub/new-$UA" ] || fail "user A's refused create left a file"
[ "$(cat "$T/b")" = "opened 4 then none, create ok, opendir ok" ] || fail "user B: '$(cat "$T/b")'"
echo "user A: $(cat "$T/a"); user B meanwhile: $(cat "$T/b")"

# Still others, while A is at the limit: B again, and root past it.
as pcfs-fds-b cat f1 >/dev/null || fail "user B cannot read a file while A is at the limit"
as pcfs-fds-b ls d1 >/dev/null || fail "user B cannot list a directory while A is at the limit"
(cd "$M" && "$PY" -I -c "$HOLD" 2 $((LIMIT + 5)) >"$T/root") &
proot=$!
wait_for 30 test -s "$T/root" || fail "root's opens did not finish"
[ "$(cat "$T/root")" = "opened $((LIMIT + 7)) then none, create ok, opendir ok" ] ||
	fail "root (never capped): '$(cat "$T/root")'"

ua=$(stat_field "$M" "user_fds.$UA") ub=$(stat_field "$M" "user_fds.$UB") ur=$(stat_field "$M" user_fds.0)
[ "$ua" = $LIMIT ] || fail "stats: user_fds.$UA '$ua', want $LIMIT"
[ "$ub" = 6 ] || fail "stats: user_fds.$UB '$ub', want 6 (1 directory, 3 files, a create, an opendir)"
[ "$ur" -ge $((LIMIT + 9)) ] || fail "stats: user_fds.0 '$ur', want $((LIMIT + 9)) or more"
[ "$(stat_field "$M" user_fd_refusals)" -ge 3 ] || fail "stats: user_fd_refusals '$(stat_field "$M" user_fd_refusals)'"
echo "stats: user_fds.$UA $ua, user_fds.$UB $ub, user_fds.0 $ur, user_fd_refusals $(stat_field "$M" user_fd_refusals)"

touch "$M/go"
wait "$pa" || fail "user A's holder exited $?"
wait "$pb" || fail "user B's holder exited $?"
wait "$proot" || fail "root's holder exited $?"
# RELEASE comes after close(2) returns: wait for it.
gone() { [ -z "$(stat_field "$M" "user_fds.$UA")" ] && [ -z "$(stat_field "$M" "user_fds.$UB")" ]; }
wait_for 10 gone || fail "stats after the last close: user_fds.$UA '$(stat_field "$M" "user_fds.$UA")'"
as pcfs-fds-a cat f2 >/dev/null || fail "user A cannot open after closing its files"
pcfs_umount "$M"
echo "after the last close: no user_fds line for A or B, and A opens again"

# The default: a sixteenth of RLIMIT_NOFILE (pcfs raises it to the hard
# limit), at least 64; and a bad value.
hard=$(ulimit -Hn)
want=65536
[ "$hard" = unlimited ] || want=$((hard / 16 < 64 ? 64 : hard / 16))
pcfs_mount "$B" "$M"
[ "$(stat_field "$M" user_fd_limit)" = "$want" ] ||
	fail "default user_fd_limit '$(stat_field "$M" user_fd_limit)', want $want (RLIMIT_NOFILE $hard)"
pcfs_umount "$M"
for bad in x -1 1k 2000000000 ""; do
	if out=$("$PCFS" -o user_fd_limit="$bad" "$B" "$M" 2>&1); then
		fail "-o user_fd_limit='$bad' was taken"
	fi
	[[ $out == "pcfs: bad value for -o user_fd_limit: '$bad'"* ]] || fail "-o user_fd_limit='$bad': '$out'"
done
! mountpoint -q "$M" || fail "mounted with a bad user_fd_limit"
echo "default user_fd_limit $want (RLIMIT_NOFILE $hard); bad values refused"
echo "userfds: ok"
