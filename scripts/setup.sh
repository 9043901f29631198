#!/usr/bin/env bash
# setup.sh - make sure the packages pagecache builds and tests with are here.
#
# As root: installs what is missing (one apt-get update, then apt-get install).
# Otherwise: prints the apt-get command to run and exits 1 when something
# required is missing.  Prints nothing when everything is present.
#
# Required: build-essential (gcc with its ASan/UBSan/TSan runtimes, make,
# binutils' nm), cmake, pkg-config, liburing-dev, util-linux (setarch),
# e2fsprogs and xfsprogs (mkfs.ext4, mkfs.xfs: the fullfs tests make small ext4
# and XFS file systems on loop devices when run as root), fuse3 and
# libfuse3-dev (pcfs, the FUSE file system, and its mounts in the tests),
# fio, git and sqlite3 (programs the pcfs tests run through a mount; the
# SQLite VFS's tests run sqlite3 too), libsqlite3-dev (sqlite/, the SQLite
# VFS, and pcbench's suite sqlite build against its headers), acl
# (setfacl: pcfs_perms_acl sets ACLs), quota (setquota: pcfs_perms_quota),
# groff-base (groff: the man_pages test renders every page of man/).
# Fuzz build (build-fuzz in scripts/test.sh): clang and libclang-rt-dev (the
# sanitizer and libFuzzer runtimes of Debian's default clang).  Installed
# like the required ones; when they cannot be, this says so and goes on, so
# the other builds still run, and test.sh counts build-fuzz as failed.
set -euo pipefail

REQUIRED=(build-essential cmake pkg-config liburing-dev util-linux e2fsprogs xfsprogs
	  fuse3 libfuse3-dev fio git sqlite3 libsqlite3-dev acl quota groff-base)
OPTIONAL=()
FUZZ=(clang libclang-rt-dev)

have_pkg() {
	dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'
}

if ! command -v dpkg-query >/dev/null 2>&1; then
	# Not Debian-like: check for the tools themselves and hope for the best.
	missing=()
	for cmd in cc cmake pkg-config nm; do
		command -v "$cmd" >/dev/null 2>&1 || missing+=("$cmd")
	done
	if ((${#missing[@]})); then
		echo "setup.sh: not a Debian system and missing: ${missing[*]}" >&2
		echo "setup.sh: install a C compiler, cmake, pkg-config, binutils and liburing's headers" >&2
		exit 1
	fi
	if ! pkg-config --exists liburing 2>/dev/null; then
		echo "setup.sh: note: liburing not found; building with the synchronous I/O fallback" >&2
	fi
	exit 0
fi

missing_req=()
missing_opt=()
missing_fuzz=()
for p in "${REQUIRED[@]}"; do have_pkg "$p" || missing_req+=("$p"); done
for p in "${OPTIONAL[@]}"; do have_pkg "$p" || missing_opt+=("$p"); done
for p in "${FUZZ[@]}"; do have_pkg "$p" || missing_fuzz+=("$p"); done

if ((${#missing_req[@]} + ${#missing_opt[@]} + ${#missing_fuzz[@]} == 0)); then
	exit 0
fi

fuzz_warning() {
	echo "setup.sh: fuzz build packages missing: $* (apt-get install -y $*);" \
	     "build-fuzz will FAIL until they are installed" >&2
}

if [ "$(id -u)" -ne 0 ]; then
	if ((${#missing_fuzz[@]})); then
		fuzz_warning "${missing_fuzz[@]}"
	fi
	if ((${#missing_req[@]})); then
		echo "setup.sh: missing required packages: ${missing_req[*]}" >&2
		all_missing=("${missing_req[@]}" "${missing_opt[@]}" "${missing_fuzz[@]}")
		echo "setup.sh: run: sudo apt-get install -y ${all_missing[*]}" >&2
		exit 1
	fi
	if ((${#missing_opt[@]})); then
		echo "setup.sh: optional package missing: ${missing_opt[*]} (sudo apt-get install -y ${missing_opt[*]})" >&2
	fi
	exit 0
fi

export DEBIAN_FRONTEND=noninteractive
all_missing=("${missing_req[@]}" "${missing_opt[@]}" "${missing_fuzz[@]}")
echo "setup.sh: installing ${all_missing[*]}"
apt-get update -qq
if ! apt-get install -y -qq "${all_missing[@]}"; then
	if ((${#missing_opt[@]} + ${#missing_fuzz[@]})) && ((${#missing_req[@]})); then
		# Try again without the optional and fuzz ones.
		apt-get install -y -qq "${missing_req[@]}"
	elif ((${#missing_req[@]})); then
		exit 1
	else
		echo "setup.sh: could not install ${missing_opt[*]} ${missing_fuzz[*]}; going on without" >&2
	fi
fi

still=()
for p in "${REQUIRED[@]}"; do have_pkg "$p" || still+=("$p"); done
if ((${#still[@]})); then
	echo "setup.sh: still missing: ${still[*]}" >&2
	exit 1
fi
still_fuzz=()
for p in "${FUZZ[@]}"; do have_pkg "$p" || still_fuzz+=("$p"); done
if ((${#still_fuzz[@]})); then
	fuzz_warning "${still_fuzz[@]}"
fi
