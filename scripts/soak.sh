#!/usr/bin/env bash
# soak.sh - run the randomized, fault and crash tests in a loop with fresh
# seeds for a while, in the Release and ASan builds.  Not run in CI.
#
#   bash scripts/soak.sh [DURATION]     DURATION: 90s, 30m, 2h or seconds (default 10m)
#
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
# Environment:
#   PC_SOAK_BUILDS="build build-asan"   builds to use (configured and built here)
#   PC_SOAK_TESTS="..."                 tests to run (default: test_mt_stress test_errors
#                                       test_fault test_model test_mt_model test_crash test_reliability test_small_files;
#                                       the ones not built are skipped)
#   PC_SOAK_STRESS_SECONDS=60           how long each test_mt_stress run lasts
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

case ${1:-} in
-h | --help)
	usage
	exit 0
	;;
esac
DURATION=$(parse_duration "${1:-10m}" 2>/dev/null) || {
	echo "soak.sh: bad duration '${1:-}' (use e.g. 90s, 30m, 2h)" >&2
	exit 2
}
[[ $DURATION =~ ^[0-9]+$ ]] || {
	echo "soak.sh: bad duration '${1:-}'" >&2
	exit 2
}

BUILDS=${PC_SOAK_BUILDS:-build build-asan}
TESTS=${PC_SOAK_TESTS:-test_mt_stress test_errors test_fault test_model test_mt_model test_crash test_reliability test_small_files}
STRESS_SECONDS=${PC_SOAK_STRESS_SECONDS:-60}
RUN_TIMEOUT=${PC_SOAK_TIMEOUT:-900}
QUICK=${PC_SOAK_QUICK:-1}
LOGDIR=$ROOT/build/soak/$(date +%Y%m%d-%H%M%S)
mkdir -p "$LOGDIR"

bash scripts/setup.sh || exit 1

# The same configurations as scripts/test.sh.
configure_and_build() {
	local b=$1
	case $b in
	build)
		cmake -S "$ROOT" -B "$ROOT/build" -DCMAKE_BUILD_TYPE=Release \
			-DCMAKE_C_FLAGS_RELEASE="-O2 -g -DNDEBUG" -DPC_SANITIZE= >/dev/null ;;
	build-asan)
		cmake -S "$ROOT" -B "$ROOT/build-asan" -DCMAKE_BUILD_TYPE=Debug \
			-DCMAKE_C_FLAGS_DEBUG="-O1 -g" -DPC_SANITIZE=address >/dev/null ;;
	*)
		echo "soak.sh: unknown build '$b' (build, build-asan)" >&2
		return 1 ;;
	esac || return 1
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

# Sanitizers may trip over high-entropy ASLR: as scripts/test.sh, turn it off.
SAN_PREFIX=()
if command -v setarch >/dev/null 2>&1 && setarch "$(uname -m)" -R true 2>/dev/null; then
	SAN_PREFIX=(setarch "$(uname -m)" -R)
fi

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
	if [ "$t" = test_mt_stress ]; then
		extra=(PC_STRESS_SECONDS="$STRESS_SECONDS")
	fi
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
for b in $BUILDS; do
	echo "==== $b: configure and build ===="
	configure_and_build "$b" || exit 1
done
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
