#!/usr/bin/env bash
# check-man.sh - lint the man pages and check that they cover the library.
#
#   check-man.sh MANDIR LIB [NM]     lint MANDIR/*.[1-8], check LIB's symbols
#   check-man.sh --installed CMAKE BUILD PREFIX MANDIR LIB [NM]
#                                    installs BUILD's man component to PREFIX
#                                    (emptied first), then `man -w` must find
#                                    every page of MANDIR and every symbol of
#                                    LIB under PREFIX/share/man (skipped, exit
#                                    77, without man(1))
#   check-man.sh --self-test         shows that the checks fail when they must
#
# Lint: every page that is not a `.so` redirect is rendered with
# `groff -ww -z -man`; any output (a warning or an error) fails.  A redirect
# page (one line, `.so manN/page.N`) must name a page that exists in MANDIR.
#
# Coverage: every symbol of `nm -D --defined-only LIB` must be named in the
# NAME or SYNOPSIS section of some page, and must have a page of its own
# name in section 3 (the page itself or a `.so` redirect to it), so that
# `man SYMBOL` works.  The linker's own symbols (_init, _end, ...) are
# skipped.  (The shared library exports only pc_*: test exports_only_pc.)
set -euo pipefail

die() { echo "check-man: $*" >&2; exit 1; }

# The target of a redirect page, or nothing for a real page.
so_target() {
	local first
	first=$(grep -v '^\.\\"' "$1" | head -n 1)
	if [[ $first =~ ^\.so[[:space:]]+([^[:space:]]+) ]]; then
		echo "${BASH_REMATCH[1]}"
	fi
}

# lint MANDIR: 0 when every page renders without a word from groff.
lint() {
	local dir=$1 page out target fail=0 n=0
	for page in "$dir"/*.[1-8]; do
		[ -e "$page" ] || continue
		n=$((n + 1))
		target=$(so_target "$page")
		if [ -n "$target" ]; then
			if [ "$(grep -cv '^\.\\"' "$page")" -ne 1 ]; then
				echo "check-man: $page: a redirect page holds only its .so line" >&2
				fail=1
			elif [ ! -f "$dir/$(basename "$target")" ]; then
				echo "check-man: $page: .so $target: no such page in $dir" >&2
				fail=1
			fi
			continue
		fi
		out=$(LC_ALL=C.UTF-8 groff -ww -z -man "$page" 2>&1) || true
		if [ -n "$out" ]; then
			echo "check-man: $page: groff -ww -z -man says:" >&2
			echo "$out" | sed 's/^/  /' >&2
			fail=1
		fi
	done
	((n > 0)) || { echo "check-man: no pages in $dir" >&2; return 1; }
	return $fail
}

# The exported symbols of LIB, one a line.
symbols() {
	"$2" -D --defined-only "$1" | awk 'NF >= 3 { print $3 }' |
		grep -Ev '^(_init|_fini|_edata|_end|__bss_start|_etext|__data_start|__dso_handle)$' |
		sed 's/@.*//' | sort -u
}

# The words of the NAME and SYNOPSIS sections of every real page of DIR.
named_words() {
	local page
	for page in "$1"/*.[1-8]; do
		[ -e "$page" ] || continue
		[ -z "$(so_target "$page")" ] || continue
		awk '/^\.SH/ { s = $0; sub(/^\.SH[ \t]+/, "", s); gsub(/"/, "", s)
			       on = (s == "NAME" || s == "SYNOPSIS"); next }
		     on' "$page"
	done | sed -e 's/\\f[BIRP]//g' -e 's/\\f(..//g' -e 's/\\f\[[^]]*\]//g' -e 's/\\[-&|^]//g' |
		grep -oE '[A-Za-z_][A-Za-z0-9_]*' | sort -u
}

# coverage MANDIR SYMBOLFILE: 0 when every symbol is named and has its page.
coverage() {
	local dir=$1 symfile=$2 sym fail=0 words
	words=$(named_words "$dir")
	[ -s "$symfile" ] || { echo "check-man: no symbols to check" >&2; return 1; }
	while read -r sym; do
		if ! grep -qxF "$sym" <<<"$words"; then
			echo "check-man: $sym is named in no page's NAME or SYNOPSIS" >&2
			fail=1
		fi
		if [ ! -f "$dir/$sym.3" ]; then
			echo "check-man: $sym has no page $dir/$sym.3 (add one, or a .so redirect)" >&2
			fail=1
		fi
	done <"$symfile"
	return $fail
}

check() {
	local dir=$1 lib=$2 nm=${3:-nm} symfile rc=0
	[ -d "$dir" ] || die "no directory $dir"
	[ -f "$lib" ] || die "no library $lib"
	command -v groff >/dev/null || die "groff not found (Debian: groff-base, see scripts/setup.sh)"
	symfile=$(mktemp)
	trap 'rm -f "$symfile"' RETURN
	symbols "$lib" "$nm" >"$symfile" || die "$nm -D --defined-only $lib failed"
	lint "$dir" || rc=1
	coverage "$dir" "$symfile" || rc=1
	if ((rc == 0)); then
		echo "check-man: $(ls "$dir"/*.[1-8] | wc -l) pages lint clean;" \
		     "all $(wc -l <"$symfile") symbols of $(basename "$lib") documented"
	fi
	return $rc
}

installed() {
	local cmake=$1 build=$2 prefix=$3 dir=$4 lib=$5 nm=${6:-nm} page name sec found fail=0 n=0
	if ! command -v man >/dev/null; then
		echo "check-man: man(1) not installed (Debian: man-db): skipping the installed-tree check"
		exit 77
	fi
	[[ $prefix == /* && $prefix != / ]] || die "the prefix must be an absolute path, not /"
	rm -rf "$prefix"
	"$cmake" --install "$build" --prefix "$prefix" --component man >/dev/null ||
		die "$cmake --install $build --prefix $prefix --component man failed"
	local mp
	mp=$(find "$prefix" -type d -name man -path '*/share/man' | head -n 1)
	[ -n "$mp" ] || die "no share/man under $prefix after the install"
	# Every page by its section and name, and every symbol by its name
	# alone, as a user asks (`man pc_open`).
	local names=()
	for page in "$dir"/*.[1-8]; do
		[ -e "$page" ] || continue
		name=$(basename "$page"); sec=${name##*.}; name=${name%.*}
		names+=("$sec:$name")
	done
	while read -r name; do names+=(":$name"); done < <(symbols "$lib" "$nm")
	for page in "${names[@]}"; do
		sec=${page%%:*}; name=${page#*:}
		n=$((n + 1))
		if ! found=$(MANPATH=$mp man -w ${sec:+"$sec"} "$name" 2>&1) || [[ $found != "$mp"/* ]]; then
			echo "check-man: MANPATH=$mp man -w ${sec:+$sec }$name: ${found:-nothing}" >&2
			fail=1
		fi
	done
	((fail == 0)) && echo "check-man: man -w finds all $n pages and symbols under $mp"
	return $fail
}

self_test() {
	local t rc=0
	t=$(mktemp -d)
	trap 'rm -rf "$t"' RETURN
	mkdir -p "$t/good" "$t/warn" "$t/nosym" "$t/badso"
	cat >"$t/good/st_one.3" <<'EOF'
.TH ST_ONE 3 2026-01-01 "selftest" "selftest Manual"
.SH NAME
st_one, st_two \- two calls
.SH SYNOPSIS
.nf
.B #include <st.h>
.PP
.BI "int st_one(int " x );
.BI "int st_two(int " x );
.fi
.SH DESCRIPTION
They do nothing.
EOF
	printf '.so man3/st_one.3\n' >"$t/good/st_two.3"
	printf 'st_one\nst_two\n' >"$t/syms"
	cp "$t/good/"* "$t/warn/"; cp "$t/good/"* "$t/nosym/"; cp "$t/good/"* "$t/badso/"
	printf '.XY an undefined macro\n' >>"$t/warn/st_one.3"
	sed -i 's/st_one, st_two/st_one/; /st_two(/d' "$t/nosym/st_one.3"
	printf '.so man3/st_three.3\n' >"$t/badso/st_two.3"

	expect() { # expect 0|1 WHAT COMMAND...
		local want=$1 what=$2 got=0
		shift 2
		"$@" 2>"$t/err" || got=1
		if ((got != want)); then
			echo "check-man: self-test: $what: expected $([ "$want" = 0 ] && echo pass || echo fail)," \
			     "got $([ $got = 0 ] && echo pass || echo fail)" >&2
			cat "$t/err" >&2
			rc=1
		else
			echo "check-man: self-test: $what: $([ "$want" = 0 ] && echo passes || echo fails) as it must"
			[ "$want" = 0 ] || sed 's/^/    /' "$t/err"
		fi
	}
	expect 0 "clean pages" lint "$t/good"
	expect 0 "all symbols named" coverage "$t/good" "$t/syms"
	expect 1 "a page with a groff warning" lint "$t/warn"
	expect 1 "a symbol in no NAME or SYNOPSIS" coverage "$t/nosym" "$t/syms"
	printf 'st_one\nst_two\nst_four\n' >"$t/syms4"
	expect 1 "an exported symbol with no page" coverage "$t/good" "$t/syms4"
	expect 1 "a redirect to a missing page" lint "$t/badso"
	return $rc
}

case ${1:-} in
--self-test) self_test ;;
--installed) shift; (($# >= 5)) || die "usage: $0 --installed CMAKE BUILD PREFIX MANDIR LIB [NM]"; installed "$@" ;;
-*|"") die "usage: $0 MANDIR LIB [NM] | --installed CMAKE BUILD PREFIX MANDIR LIB [NM] | --self-test" ;;
*) (($# >= 2)) || die "usage: $0 MANDIR LIB [NM]"; check "$@" ;;
esac
