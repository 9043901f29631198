# The CI smoke run of pcbench (ctest pcbench_quick):
#
#   cmake -DPCBENCH=build/pcbench -DDIR=scratch -DOUT=out.json -P pcbench_smoke.cmake
#
# runs `pcbench --quick --json OUT --dir DIR` (every suite at small sizes)
# and checks the JSON: a "machine" object, a non-empty "results" array whose
# every object has the fields of issue 9, results of every default suite,
# no pagecache path in error, both competing writers of each pair measured
# (MiB/s > 0), a bad option and an --only word that names no path refused
# in a line or two (exit 2), and that
# pagecache-dontcache read nothing back
# in the interleaved suite: no 4 KiB device read on a new file, and over
# existing data at most the one tail block the last record leaves part
# written (no neighbour completes it; the workload itself asks for it),
# by the library's count and by /proc/self/io's (see below).
# Figures are not judged: a smoke run is too short to be a benchmark.
cmake_minimum_required(VERSION 3.19)

foreach(var PCBENCH DIR OUT)
	if(NOT DEFINED ${var})
		message(FATAL_ERROR "pcbench_smoke: -D${var}=... is required")
	endif()
endforeach()

# A bad option: exit status 2 and a short message, not the whole help.
execute_process(COMMAND ${PCBENCH} --no-such-option RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
string(REGEX MATCHALL "\n" lines "${err}")
list(LENGTH lines nlines)
if(NOT rc EQUAL 2 OR nlines GREATER 2)
	message(FATAL_ERROR "pcbench --no-such-option: exit ${rc} (want 2), ${nlines} lines (at most 2):\n${err}")
endif()

# --only with a word no path contains: refused in one line (exit 2), not a
# run that measures nothing of it.
execute_process(COMMAND ${PCBENCH} --only nonesuch RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
string(REGEX MATCHALL "\n" lines "${err}")
list(LENGTH lines nlines)
if(NOT rc EQUAL 2 OR nlines GREATER 1)
	message(FATAL_ERROR "pcbench --only nonesuch: exit ${rc} (want 2), ${nlines} lines (at most 1):\n${err}")
endif()

file(MAKE_DIRECTORY ${DIR})
file(REMOVE ${OUT})
string(TIMESTAMP t0 "%s")
execute_process(COMMAND ${PCBENCH} --quick --dir ${DIR} --json ${OUT}
		RESULT_VARIABLE rc OUTPUT_FILE ${OUT}.log ERROR_FILE ${OUT}.err)
string(TIMESTAMP t1 "%s")
math(EXPR secs "${t1} - ${t0}")
message(STATUS "pcbench --quick took ${secs} s (output in ${OUT}.log)")
if(NOT rc EQUAL 0)
	file(READ ${OUT}.err err)
	message(FATAL_ERROR "pcbench --quick exited with ${rc}:\n${err}")
endif()

file(READ ${OUT} json)
string(JSON mtype ERROR_VARIABLE err TYPE "${json}" machine)
if(err OR NOT mtype STREQUAL "OBJECT")
	message(FATAL_ERROR "pcbench JSON: no \"machine\" object (${err})")
endif()
string(JSON n ERROR_VARIABLE err LENGTH "${json}" results)
if(err OR n EQUAL 0)
	message(FATAL_ERROR "pcbench JSON: no \"results\" array, or an empty one (${err})")
endif()

set(keys suite workload path mib_s ops_s p50_us p99_us p999_us peak_dirty_bytes
	 reads_per_write cached_after_bytes target pass)
# What each may hold (null: not meaningful for that result).
set(type_suite STRING)
set(type_workload STRING)
set(type_path STRING)
set(type_target "STRING|NULL")
set(type_pass "BOOLEAN|NULL")
foreach(k mib_s ops_s p50_us p99_us p999_us peak_dirty_bytes reads_per_write cached_after_bytes)
	set(type_${k} "NUMBER|NULL")
endforeach()
set(suites_seen "")
set(il_checked 0)
set(comp_checked 0)
math(EXPR last "${n} - 1")
foreach(i RANGE ${last})
	string(JSON r GET "${json}" results ${i})
	foreach(k ${keys})
		string(JSON type ERROR_VARIABLE err TYPE "${r}" ${k})
		if(err)
			message(FATAL_ERROR "pcbench JSON: result ${i} has no \"${k}\": ${r}")
		endif()
		if(NOT type MATCHES "^(${type_${k}})$")
			message(FATAL_ERROR "pcbench JSON: result ${i}'s \"${k}\" is ${type}, not ${type_${k}}: ${r}")
		endif()
	endforeach()
	string(JSON suite GET "${r}" suite)
	string(JSON workload GET "${r}" workload)
	string(JSON path GET "${r}" path)
	string(JSON error GET "${r}" error)
	list(APPEND suites_seen ${suite})
	if(path MATCHES "^pagecache-" AND NOT error STREQUAL "")
		message(FATAL_ERROR "pcbench: ${suite} / ${workload} / ${path}: ${error}")
	endif()
	# Both competing writers measured: each wrote while the other did.
	if(suite STREQUAL "dontcache" AND workload MATCHES "^competing")
		string(JSON mib GET "${r}" mib_s)
		if(NOT mib GREATER 0)
			message(FATAL_ERROR "pcbench: ${workload} / ${path}: ${mib} MiB/s (a writer not measured)")
		endif()
		math(EXPR comp_checked "${comp_checked} + 1")
	endif()
	if(suite STREQUAL "interleaved" AND path STREQUAL "pagecache-dontcache")
		string(JSON mtype TYPE "${r}" mib_s)
		if(NOT mtype STREQUAL "NUMBER")
			message(FATAL_ERROR "pcbench: interleaved / ${workload} / pagecache-dontcache has no MiB/s")
		endif()
		string(JSON reads GET "${r}" device_reads_4k)
		if(workload MATCHES "^overwrite")
			set(allowed 1)
		else()
			set(allowed 0)
		endif()
		# a whole number of reads, printed as an integer
		if(NOT reads MATCHES "^[0-9]+$" OR reads GREATER allowed)
			message(FATAL_ERROR "pcbench: interleaved / ${workload} / pagecache-dontcache read "
					    "${reads} blocks back (at most ${allowed})")
		endif()
		# The same read-back counted independently of the library: this
		# process's read_bytes in /proc/self/io.  On ext4 it is not 0 for a
		# file whose end is not block-aligned: pc_fsync sets the backing
		# file's size with ftruncate(2) after the last block went to the
		# device whole, and the file system reads that block to zero its
		# tail (ext4_block_zero_page_range; traced with perf); over
		# existing data the library itself merges it (counted above).
		# So the tail block is allowed, once, and a few blocks of file
		# system metadata read in this process's context (extent and
		# bitmap blocks after drop_caches): 8 blocks in all, where a
		# read-back of the records' edges would be one block per record
		# boundary (over 100 at --quick sizes).
		string(JSON pbytes GET "${r}" proc_read_bytes)
		if(NOT pbytes STREQUAL "null")
			string(REGEX MATCH "([0-9]+) B records" m "${workload}")
			string(JSON writes GET "${r}" writes)
			math(EXPR tail "(${writes} * ${CMAKE_MATCH_1}) % 4096")
			if(tail GREATER 0)
				set(pallowed 9)
			else()
				set(pallowed 8)
			endif()
			math(EXPR pblocks "(${pbytes} + 4095) / 4096")
			if(pblocks GREATER pallowed)
				message(FATAL_ERROR "pcbench: interleaved / ${workload} / pagecache-dontcache: /proc/self/io "
						    "read ${pbytes} bytes (${pblocks} blocks, at most ${pallowed}): a read-back "
						    "the library did not count")
			endif()
		endif()
		math(EXPR il_checked "${il_checked} + 1")
	endif()
endforeach()

foreach(s interleaved dontcache fstime read readahead files startup metadata)
	list(FIND suites_seen ${s} found)
	if(found EQUAL -1)
		message(FATAL_ERROR "pcbench JSON: no result of suite ${s}")
	endif()
endforeach()
# four pairs: kernel and pagecache, buffered vs dontcache and buffered vs
# buffered
if(NOT comp_checked EQUAL 8)
	message(FATAL_ERROR "pcbench JSON: ${comp_checked} competing writers' results, not 8")
endif()
if(il_checked EQUAL 0)
	message(FATAL_ERROR "pcbench JSON: no interleaved pagecache-dontcache result")
endif()
message(STATUS "pcbench JSON: ${n} results, every field there; interleaved pagecache-dontcache "
	       "read nothing back in ${il_checked} runs")
