#!/usr/bin/env bash
# soak.sh - run tests again and again, to find what fails once in many
# runs.  Not run in CI.  Two modes:
#
#   bash scripts/soak.sh [DURATION]     seed loop; DURATION: 90s, 30m, 2h or seconds (default 10m)
#   bash scripts/soak.sh --ctest [N]    repeat loop: N passes in a row wanted (default 50)
#
# Seed loop: the randomized, fault and crash tests in a loop with fresh seeds
# for a while, in the Release and ASan builds.
# Every round runs each test once per build with a new PC_SEED (the stress
# test for PC_SOAK_STRESS_SECONDS), each under `timeout` so a hang is caught
# and reported rather than waited for.  New runs start until the duration is
# over; the last ones finish.  Ctrl-C stops and prints the report so far.
#
# Report: per build and test, the runs, failures and hangs, and the
# operations the tests say they did (their "N operations" line); then every
# failed or hung run with its seed, its log and the command that replays it.
# Logs of failed runs are kept in build/soak/; the exit status is non-zero
# if any run failed or hung.
#
# Repeat loop (--ctest N): `ctest --repeat until-fail:N` in build-asan and
# build-tsan, configured as scripts/test.sh configures them (scripts/builds.sh),
# over two groups of tests: `fork`, the cases of the test files that fork
# (tests/test_*.c that call fork, tu_fork or tu_fork_alone) but are not
# concurrency tests, and
# `concurrency`, the label (test_mt_*; build-tsan registers these and
# test_segment, which is in the fork group).
# ctest stops repeating a test at its first failure.  Report: per build and
# group, the passes in a row (those of its weakest test: N when every test
# passed N times) and the time taken, then every failed test with the passes
# it had before; ctest's logs of failed groups are kept in build/soak/.  The
# exit status is non-zero if any test failed.  One repetition of every
# group takes about a minute and a half on 2 cores, after the builds.
#
# Environment (PC_SOAK_BUILDS for both modes, the others for the seed loop):
#   PC_SOAK_BUILDS="build build-asan"   builds to use (configured and built here;
#                                       --ctest: "build-asan build-tsan")
#   PC_SOAK_TESTS="..."                 test programs to run whole (default: test_mt_stress_small_blocks
#                                       test_mt_stress_large_blocks test_errors test_fault test_model_sizes
#                                       test_model_options test_mt_model test_crash test_reliability
#                                       test_small_files; the ones not built are skipped)
#   PC_SOAK_STRESS_SECONDS=60           how long each test_mt_stress_* run lasts (its two
#                                       cases, half each)
#   PC_SOAK_TIMEOUT=900                 seconds after which a run counts as hung
#   PC_SOAK_QUICK=1                     PC_TEST_QUICK for the runs (default 1: shorter
#                                       runs, so more seeds per hour; 0 for full runs)
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)

usage() {
	sed -n '2,/^set /p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'
}

# "30m" -> 1800
parse_duration() {
	local d=$1
	case $d in
	*[0-9]s) echo "${d%s}" ;;
	*[0-9]m) echo $((${d%m} * 60)) ;;
	*[0-9]h) echo $((${d%h} * 3600)) ;;
	*[0-9]) echo "$d" ;;
	*) return 1 ;;
	esac
}

REPEAT=
case ${1:-} in
-h | --help)
	usage
	exit 0
	;;
--ctest)
	REPEAT=${2:-50}
	[[ $REPEAT =~ ^[1-9][0-9]*$ ]] || {
		echo "soak.sh: --ctest wants a number of passes, not '$REPEAT'" >&2
		exit 2
	}
	;;
*)
	DURATION=$(parse_duration "${1:-10m}" 2>/dev/null) || {
		echo "soak.sh: bad duration '${1:-}' (use e.g. 90s, 30m, 2h)" >&2
		exit 2
	}
	[[ $DURATION =~ ^[0-9]+$ ]] || {
		echo "soak.sh: bad duration '${1:-}'" >&2
		exit 2
	}
	;;
esac

if [ -n "$REPEAT" ]; then
	BUILDS=${PC_SOAK_BUILDS:-build-asan build-tsan}
else
	BUILDS=${PC_SOAK_BUILDS:-build build-asan}
	for b in $BUILDS; do
		case $b in
		build | build-asan) ;;
		*)
			echo "soak.sh: the seed loop runs in build and build-asan, not '$b'" >&2
			exit 2 ;;
		esac
	done
fi
TESTS=${PC_SOAK_TESTS:-test_mt_stress_small_blocks test_mt_stress_large_blocks test_errors test_fault test_model_sizes test_model_options test_mt_model test_crash test_reliability test_small_files}
STRESS_SECONDS=${PC_SOAK_STRESS_SECONDS:-60}
RUN_TIMEOUT=${PC_SOAK_TIMEOUT:-900}
QUICK=${PC_SOAK_QUICK:-1}
LOGDIR=$ROOT/build/soak/$(date +%Y%m%d-%H%M%S)
mkdir -p "$LOGDIR"

bash scripts/setup.sh || exit 1
. scripts/builds.sh

# The same configurations as scripts/test.sh (scripts/builds.sh).
configure_and_build() {
	local b=$1
	if [ "$b" = build-fuzz ] || ! pc_cmake_args "$b"; then
		echo "soak.sh: unknown build '$b' (build, build-asan, build-tsan)" >&2
		return 1
	fi
	cmake -S "$ROOT" -B "$ROOT/$b" "${CMAKE_ARGS[@]}" >/dev/null || return 1
	cmake --build "$ROOT/$b" -j "$(nproc 2>/dev/null || echo 2)" >"$LOGDIR/$b-build.log" 2>&1 || {
		echo "soak.sh: building $b failed, see $LOGDIR/$b-build.log" >&2
		return 1
	}
}

# Environment of a test run in build $1 (what CMakeLists.txt gives ctest).
run_env() {
	echo "PC_TEST_DIR=$ROOT/$1/testdata"
	echo "PC_TEST_QUICK=$QUICK"
	if [ "$1" = build-asan ]; then
		echo "ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=1"
		echo "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1"
	fi
}

for b in $BUILDS; do
	echo "==== $b: configure and build ===="
	configure_and_build "$b" || exit 1
done

# ------------------------------------------------------------ repeat loop

# The passes in a row of each test in a ctest log: "NAME PASSES END", END
# the result that ended the streak ("-" if none did, "Skipped" for a test
# that only skipped itself).  Skips do not count.
streaks() {
	sed -nE 's/.*Test +#[0-9]+: ([^ ]+) \.+ *(\*\*\*)?([A-Za-z]+).*/\1 \3/p' "$1" |
		awk '!($1 in n) { n[$1] = 0; end[$1] = "-"; order[++k] = $1 }
		     end[$1] == "-" && $2 == "Passed" { n[$1]++ }
		     end[$1] == "-" && $2 != "Passed" && $2 != "Skipped" { end[$1] = $2 }
		     END { for (i = 1; i <= k; i++) {
				t = order[i]
				print t, n[t], (n[t] == 0 && end[t] == "-") ? "Skipped" : end[t]
		     } }'
}

repeat_report=()
repeat_failed=()

# repeat_group BUILD GROUP CTEST_ARGS...: one `ctest --repeat until-fail`.
repeat_group() {
	local b=$1 group=$2 log=$LOGDIR/$1.$2.log t0=$SECONDS prefix=() fewest="" ntests=0 skipped="" name n end
	shift 2
	if [ "$b" != build ]; then
		prefix=("${SAN_PREFIX[@]}")
	fi
	echo "==== $b, $group: ctest --repeat until-fail:$REPEAT $* (log $log) ===="
	(cd "$ROOT/$b" && "${prefix[@]}" ctest --repeat until-fail:"$REPEAT" -j2 --output-on-failure \
		--no-tests=ignore "$@") >"$log" 2>&1
	local rc=$?
	while read -r name n end; do
		if [ "$end" = Skipped ]; then
			skipped+=" $name"
			continue
		fi
		ntests=$((ntests + 1))
		if [ -z "$fewest" ] || [ "$n" -lt "$fewest" ]; then
			fewest=$n
		fi
		if [ "$end" != - ]; then
			repeat_failed+=("$b $group: $name passed $n times in a row, then $end")
		fi
	done < <(streaks "$log")
	if [ "$ntests" -eq 0 ]; then
		repeat_report+=("$(printf '%-10s %-12s %5s  no tests%s' "$b" "$group" - "${skipped:+ (skipped:$skipped)}")")
	else
		repeat_report+=("$(printf '%-10s %-12s %5d  %d of %d%s (%ds)%s' "$b" "$group" "$ntests" "$fewest" \
			"$REPEAT" "$([ "$rc" -ne 0 ] && echo ', FAILED')" $((SECONDS - t0)) \
			"${skipped:+; skipped:$skipped}")")
	fi
	echo "${repeat_report[-1]}"
	if [ "$rc" -eq 0 ]; then
		rm -f "$log"
	elif [ "$ntests" -gt 0 ] && [ "$fewest" -eq "$REPEAT" ]; then
		repeat_failed+=("$b $group: ctest failed (exit $rc), see $log")
	fi
}

repeat_report_print() {
	echo
	echo "==== soak.sh --ctest $REPEAT report: $((SECONDS - start))s ===="
	printf '%-10s %-12s %5s  %s\n' build group tests "passes in a row"
	printf '%s\n' "${repeat_report[@]}"
	if [ "${#repeat_failed[@]}" -eq 0 ]; then
		echo "no failures"
		rmdir "$LOGDIR" 2>/dev/null
		return 0
	fi
	echo
	echo "failures (ctest logs kept in $LOGDIR):"
	printf '  %s\n' "${repeat_failed[@]}"
	return 1
}

if [ -n "$REPEAT" ]; then
	# The tests that fork, but for the concurrency ones (their own group).
	# Their cases' CTest names start with the file's name without "test_".
	# A file forks itself, through a tests/*_util.h it includes, or through
	# the tests/<prefix>_util*.c linked into test_<prefix>[_*] (CMakeLists.txt).
	fork_pattern='=[[:space:]]*(tu_fork|tu_fork_alone|fork)\('
	fork_files=$(grep -lE "$fork_pattern" tests/test_*.c
		for h in $(grep -lE "$fork_pattern" tests/*_util.h 2>/dev/null); do
			grep -l "#include \"${h##*/}\"" tests/test_*.c
		done
		for u in $(grep -lE "$fork_pattern" tests/*_util*.c 2>/dev/null); do
			prefix=${u##*/}
			prefix=${prefix%%_util*}
			ls tests/test_"$prefix".c tests/test_"$prefix"_*.c 2>/dev/null
		done)
	fork_tests=$(printf '%s\n' $fork_files | sort -u | sed 's|.*/test_||; s|\.c$||' | paste -sd '|')
	start=$SECONDS
	trap 'repeat_report_print; exit 130' INT TERM
	for b in $BUILDS; do
		repeat_group "$b" fork -R "^($fork_tests)\." -LE concurrency
		repeat_group "$b" concurrency -L concurrency
	done
	trap - INT TERM
	repeat_report_print
	exit
fi

# -------------------------------------------------------------- seed loop

new_seed() {
	od -An -N6 -tu8 /dev/urandom | tr -d ' '
}

declare -A runs fails hangs ops
problems=()
total_runs=0

# run_one BUILD TEST: one run with a new seed; updates the counters.
run_one() {
	local b=$1 t=$2 seed log rc n extra=() prefix=() t0=$SECONDS
	seed=$(new_seed)
	log=$LOGDIR/$b.$t.$seed.log
	# PC_STRESS_SECONDS is per case, and each stress program has two.
	case $t in
	test_mt_stress_*) extra=(PC_STRESS_SECONDS="$(((STRESS_SECONDS + 1) / 2))") ;;
	esac
	if [ "$b" != build ]; then
		prefix=("${SAN_PREFIX[@]}")
	fi
	mapfile -t envs < <(run_env "$b")
	(cd "$ROOT/$b/testdata" &&
		env "${envs[@]}" PC_SEED="$seed" "${extra[@]}" \
			timeout -k 30 "$RUN_TIMEOUT" "${prefix[@]}" "../$t") >"$log" 2>&1
	rc=$?
	local key="$b $t"
	runs[$key]=$((${runs[$key]:-0} + 1))
	total_runs=$((total_runs + 1))
	n=$(grep -Eo '^test_[a-z_]+: [0-9]+ (random )?operations' "$log" | tail -n 1 | grep -Eo '[0-9]+ ' | tr -d ' ')
	if [ -n "$n" ]; then
		ops[$key]=$((${ops[$key]:-0} + n))
	fi
	local took=$((SECONDS - t0))
	local replay="cd $b/testdata && PC_SEED=$seed PC_TEST_QUICK=$QUICK ${extra[*]} PC_TEST_DIR=\$PWD ../$t"
	if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
		hangs[$key]=$((${hangs[$key]:-0} + 1))
		problems+=("HANG   $b $t seed $seed (killed after ${RUN_TIMEOUT}s): $log
         replay: $replay")
		printf '  %-10s %-15s seed %-16s HANG (%ds)\n' "$b" "$t" "$seed" "$took"
	elif [ "$rc" -ne 0 ]; then
		fails[$key]=$((${fails[$key]:-0} + 1))
		local first
		first=$(grep -m1 -E 'FAILED|MISMATCH|ERROR|WATCHDOG|CHECK failed|REQUIRE failed|runtime error' "$log" | cut -c1-160)
		problems+=("FAILED $b $t seed $seed (exit $rc): $log
         ${first:-(no failure line; see the log)}
         replay: $replay")
		printf '  %-10s %-15s seed %-16s FAILED (exit %d, %ds)\n' "$b" "$t" "$seed" "$rc" "$took"
	else
		rm -f "$log"
		printf '  %-10s %-15s seed %-16s ok (%ds%s)\n' "$b" "$t" "$seed" "$took" "${n:+, $n operations}"
	fi
}

report() {
	local status=0 key
	echo
	echo "==== soak.sh report: $total_runs runs in $((SECONDS - start))s ===="
	printf '%-10s %-15s %6s %7s %6s %14s\n' build test runs failed hangs operations
	for t in $TESTS; do
		for b in $BUILDS; do
			key="$b $t"
			[ -n "${runs[$key]:-}" ] || continue
			printf '%-10s %-15s %6d %7d %6d %14s\n' "$b" "$t" "${runs[$key]}" "${fails[$key]:-0}" \
				"${hangs[$key]:-0}" "${ops[$key]:--}"
		done
	done
	echo "(operations: the sum of what the tests print; - for tests that print none)"
	if [ "${#skipped[@]}" -gt 0 ]; then
		echo "not built, skipped: ${skipped[*]}"
	fi
	if [ "${#problems[@]}" -gt 0 ]; then
		status=1
		echo
		echo "failed or hung runs (logs kept in $LOGDIR):"
		for p in "${problems[@]}"; do
			echo "  $p"
		done
	else
		echo "no failures, no hangs"
		rmdir "$LOGDIR" 2>/dev/null
	fi
	return $status
}

skipped=()
active=()
# Each test in every build before the next test: a short soak still
# covers both builds.
for t in $TESTS; do
	for b in $BUILDS; do
		if [ -x "$ROOT/$b/$t" ]; then
			active+=("$b $t")
		else
			skipped+=("$b/$t")
		fi
	done
done
if [ "${#active[@]}" -eq 0 ]; then
	echo "soak.sh: none of the tests is built" >&2
	exit 1
fi

start=$SECONDS
trap 'report; exit 130' INT TERM
echo "==== soak for ${DURATION}s: ${#active[@]} test/build pairs, logs in $LOGDIR ===="
round=0
while [ $((SECONDS - start)) -lt "$DURATION" ]; do
	round=$((round + 1))
	echo "round $round ($((SECONDS - start))s of ${DURATION}s)"
	for pair in "${active[@]}"; do
		[ $((SECONDS - start)) -lt "$DURATION" ] || break
		run_one $pair
	done
done
trap - INT TERM
report
