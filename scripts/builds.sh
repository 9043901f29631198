# builds.sh - the builds that scripts/test.sh and scripts/soak.sh make, in
# one place.  Sourced, not run:
#
#   pc_cmake_args NAME   sets the array CMAKE_ARGS to the cmake arguments of
#                        build NAME; returns 1 for an unknown name
#   SAN_PREFIX           the command to run sanitized tests under (an array)
#
#   build       Release (-O2 -g), all tests
#   build-asan  Debug (-O1 -g) with ASan + UBSan, all tests
#   build-tsan  -O2 -g with TSan, the tests labeled `concurrency` (test_mt_*) and
#               test_segment
#   build-fuzz  $PC_FUZZ_CC (default clang), -O1 -g, libFuzzer + ASan + UBSan

PC_FUZZ_CC=${PC_FUZZ_CC:-clang}

pc_cmake_args() {
	case $1 in
	build)
		CMAKE_ARGS=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS_RELEASE="-O2 -g -DNDEBUG" -DPC_SANITIZE=) ;;
	build-asan)
		CMAKE_ARGS=(-DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-O1 -g" -DPC_SANITIZE=address) ;;
	build-tsan)
		CMAKE_ARGS=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g"
			    -DPC_SANITIZE=thread) ;;
	build-fuzz)
		CMAKE_ARGS=(-DCMAKE_C_COMPILER="$PC_FUZZ_CC" -DPC_FUZZ=ON -DCMAKE_BUILD_TYPE=Debug
			    -DCMAKE_C_FLAGS_DEBUG="-O1 -g") ;;
	*)
		return 1 ;;
	esac
}

# Sanitizer runtimes can trip over high-entropy address-space randomisation;
# run sanitized tests with it off when the kernel lets us.
SAN_PREFIX=()
if command -v setarch >/dev/null 2>&1 && setarch "$(uname -m)" -R true 2>/dev/null; then
	SAN_PREFIX=(setarch "$(uname -m)" -R)
fi
