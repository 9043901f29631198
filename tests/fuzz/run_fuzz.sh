#!/usr/bin/env bash
# run_fuzz.sh FUZZER FUZZ_SRC_DIR WORKDIR [libFuzzer args...]
#
# One fuzzing campaign of PC_FUZZ_SECONDS (default 60) seconds, as ctest
# runs it.  The seed corpus (FUZZ_SRC_DIR/corpus) and the inputs of bugs
# found before (FUZZ_SRC_DIR/crashes, regression inputs) are copied into
# WORKDIR/corpus: the fuzzer runs them all first, then adds the inputs it
# finds there, so the repository stays as it is and later runs start from
# what earlier ones found.  Data files go to WORKDIR/data, crash, leak and
# timeout inputs to WORKDIR/crashes/, the output to WORKDIR/last-run.log.
# Exit status: libFuzzer's (0 when the time ran out without a finding).
set -euo pipefail

fuzzer=$1 src=$2 work=$3
shift 3
secs=${PC_FUZZ_SECONDS:-60}

mkdir -p "$work/corpus" "$work/crashes" "$work/data"
for f in "$src"/corpus/* "$src"/crashes/*; do
	[ -e "$f" ] && [[ $f != *.md ]] || continue
	[ -e "$work/corpus/${f##*/}" ] || cp "$f" "$work/corpus/"
done

export PC_FUZZ_DIR=$work/data
echo "run_fuzz.sh: $secs s; corpus $work/corpus; crash inputs in $work/crashes/"
set +e
"$fuzzer" -max_total_time="$secs" -timeout=60 -print_final_stats=1 \
	-artifact_prefix="$work/crashes/" "$@" "$work/corpus" 2>&1 | tee "$work/last-run.log"
rc=${PIPESTATUS[0]}
if [ "$rc" -ne 0 ]; then
	echo "run_fuzz.sh: FAILED (libFuzzer exit $rc); the input is in $work/crashes/;" \
	     "replay: PC_FUZZ_VERBOSE=1 $fuzzer <that file>"
fi
exit "$rc"
