#!/bin/sh
# check-test-cases.sh CASES_FILE BUILD_DIR
#
# CMake registered a CTest for each "TEST_CASE(name)" line it read in the
# test sources (CASES_FILE: "program case" lines).  Each program's --list
# says which cases it really has: the two must agree, or a case would
# never run (a TEST_CASE indented, behind an #if, or made by a macro).
set -eu
cases=$1
build=$2
status=0
for prog in $(cut -d' ' -f1 "$cases" | sort -u); do
	want=$(grep "^$prog " "$cases" | cut -d' ' -f2 | sort)
	have=$("$build/$prog" --list | sort)
	if [ "$want" != "$have" ]; then
		echo "$prog: registered and listed cases differ:"
		printf '%s\n' "$want" >/tmp/check-test-cases.want.$$
		printf '%s\n' "$have" >/tmp/check-test-cases.have.$$
		diff /tmp/check-test-cases.want.$$ /tmp/check-test-cases.have.$$ || true
		rm -f /tmp/check-test-cases.want.$$ /tmp/check-test-cases.have.$$
		status=1
	fi
done
n=$(wc -l <"$cases")
echo "$n cases registered, each listed by its program"
exit $status
