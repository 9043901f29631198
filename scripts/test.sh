#!/usr/bin/env bash
# test.sh - the one test command: build and run every test four ways
# (their configurations: scripts/builds.sh).
#
#   build       Release (-O2 -g), all tests
#   build-asan  Debug (-O1 -g) with ASan + UBSan, all tests
#   build-tsan  -O2 -g with TSan, the tests labeled `concurrency` (test_mt_*) and
#               test_segment
#   build-fuzz  clang, -O1 -g, libFuzzer + ASan + UBSan: tests/fuzz/fuzz_api
#               run for PC_FUZZ_SECONDS on a copy of tests/fuzz/corpus, one
#               test in the summary.  Without clang it FAILS (it is not
#               skipped): scripts/setup.sh as root installs clang.
#
# Every build is configured, built and tested even if an earlier one failed;
# a summary follows and the exit status is non-zero if anything failed.
#
# Environment:
#   PC_BUILDS="build build-asan build-tsan build-fuzz"  which builds to do (default all)
#   PC_TEST_QUICK=1   shorter random tests (read by the tests themselves)
#   PC_SEED=N         replay a random test with the seed it printed
#   PC_FUZZ_SECONDS=N how long build-fuzz fuzzes (default 60)
#   PC_FUZZ_CC=clang  the clang build-fuzz uses
#   CI=...            set (as CI sets it): a test that would skip itself
#                     (exit 77: the pcfs mounts, the fullfs and nosyncfs cases
#                     need root, /dev/fuse, loop devices) fails instead,
#                     but for a feature the kernel says it lacks (pcfs's
#                     quota rule without quota support in the kernel).
# Skipped tests are named in the summary.
# Extra arguments go to ctest, e.g.  bash scripts/test.sh -R uncached_edges
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)

bash scripts/setup.sh
. scripts/builds.sh

JOBS=$(nproc 2>/dev/null || echo 2)
BUILDS=${PC_BUILDS:-build build-asan build-tsan build-fuzz}
CTEST_ARGS=("$@")

summary=()
skip_reasons=()
total_pass=0
total_fail=0
status=0

# run_build NAME NO_TESTS_POLICY: configure (scripts/builds.sh), build and
# test build NAME; the sanitized ones (all but `build`) under SAN_PREFIX.
run_build() {
	local name=$1 no_tests=$2
	local dir=$ROOT/$name log rc line passed failed total failed_names skipped skipped_names
	log=$dir/ctest.log

	echo
	echo "==== $name: configure ===="
	pc_cmake_args "$name"
	if ! cmake -S "$ROOT" -B "$dir" "${CMAKE_ARGS[@]}"; then
		summary+=("$(printf '%-11s CONFIGURE FAILED' "$name")")
		total_fail=$((total_fail + 1))
		return 1
	fi
	echo "==== $name: build ===="
	if ! cmake --build "$dir" -j "$JOBS"; then
		summary+=("$(printf '%-11s BUILD FAILED' "$name")")
		total_fail=$((total_fail + 1))
		return 1
	fi

	echo "==== $name: ctest ===="
	local prefix=()
	if [ "$name" != build ]; then
		prefix=("${SAN_PREFIX[@]}")
	fi
	set +e
	(cd "$dir" && "${prefix[@]}" ctest --output-on-failure -j2 --no-tests="$no_tests" \
		"${CTEST_ARGS[@]}") 2>&1 | tee "$log"
	rc=${PIPESTATUS[0]}
	set -e

	line=$(grep -E 'tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -n 1 || true)
	if [[ $line =~ ([0-9]+)\ tests?\ failed\ out\ of\ ([0-9]+) ]]; then
		failed=${BASH_REMATCH[1]}
		total=${BASH_REMATCH[2]}
	else
		failed=0
		total=0
	fi
	failed_names=$(sed -n '/The following tests FAILED:/,$p' "$log" |
		       sed -n 's/^[[:space:]]*[0-9]* - \([^ ]*\).*/\1/p' | tr '\n' ' ')
	# Skipped tests are in ctest's "passed": counted and named apart.
	skipped_names=$(sed -n '/The following tests did not run:/,/^$/p' "$log" |
			sed -n 's/^[[:space:]]*[0-9]* - \([^ ]*\) (Skipped).*/\1/p' | tr '\n' ' ')
	skipped=$(wc -w <<<"$skipped_names")
	passed=$((total - failed - skipped))
	# ctest shows no output of a skipped test: say why each skipped, from
	# the full log (its first line that says "skip").
	local t why
	for t in $skipped_names; do
		why=$(awk -v t="$t" '$0 ~ "Test: " t "$" { on = 1; next }
				   on && /^[0-9]+\/[0-9]+ Test: / { exit }
				   on && tolower($0) ~ /skip/ { print; exit }' \
			"$dir/Testing/Temporary/LastTest.log" 2>/dev/null)
		skip_reasons+=("$name: $t: ${why:-(no reason printed)}")
	done
	if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
		failed=1 # ctest itself failed (no tests, bad arguments, ...)
	fi
	total_pass=$((total_pass + passed))
	total_fail=$((total_fail + failed))

	if [ "$rc" -eq 0 ]; then
		if [ "$total" -eq 0 ]; then
			summary+=("$(printf '%-11s ok (no tests registered)' "$name")")
		else
			summary+=("$(printf '%-11s ok     %d/%d tests passed%s' "$name" "$passed" "$total" \
				     "${skipped_names:+, $skipped skipped: ${skipped_names% }}")")
		fi
		return 0
	fi
	summary+=("$(printf '%-11s FAILED %d/%d tests passed%s' "$name" "$passed" "$total" \
		     "${failed_names:+ (failed: ${failed_names% })}")")
	return 1
}

for b in $BUILDS; do
	case $b in
	build | build-asan)
		run_build "$b" error || status=1
		;;
	build-tsan)
		# Only concurrency tests (and test_segment) are registered here; none
		# yet is not an error.
		run_build build-tsan ignore || status=1
		;;
	build-fuzz)
		# No clang is a failure, never a skip: the fuzz run is part of CI.
		if ! command -v "$PC_FUZZ_CC" >/dev/null 2>&1; then
			echo "test.sh: build-fuzz needs $PC_FUZZ_CC (apt-get install clang libclang-rt-dev)" >&2
			summary+=("$(printf '%-11s FAILED: %s not installed (run scripts/setup.sh as root)' \
				     build-fuzz "$PC_FUZZ_CC")")
			total_fail=$((total_fail + 1))
			status=1
			continue
		fi
		# Its one test is fuzz_api; a ctest filter for other tests (-R)
		# matching nothing here is not an error.
		fuzz_no_tests=error
		if ((${#CTEST_ARGS[@]})); then
			fuzz_no_tests=ignore
		fi
		rm -f "$ROOT/build-fuzz/fuzz/last-run.log" # only this run's figures below
		run_build build-fuzz "$fuzz_no_tests" || status=1
		if [ -f "$ROOT/build-fuzz/fuzz/last-run.log" ]; then
			echo "==== build-fuzz: libFuzzer final stats ===="
			grep -E '^(stat::|Done )' "$ROOT/build-fuzz/fuzz/last-run.log" || true
		fi
		;;
	*)
		echo "test.sh: unknown build '$b' in PC_BUILDS" >&2
		summary+=("$(printf '%-11s UNKNOWN BUILD' "$b")")
		total_fail=$((total_fail + 1))
		status=1
		;;
	esac
done

echo
echo "==== test.sh summary ===="
for s in "${summary[@]}"; do
	echo "$s"
done
for s in "${skip_reasons[@]}"; do
	echo "skipped, $s"
done
echo "summary: $total_pass passed, $total_fail failed"
exit "$status"
