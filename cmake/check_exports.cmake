# check_exports.cmake - fail unless the shared library exports only pc_*.
#
#   cmake -DNM=nm -DLIB=path/to/libpagecache.so -P check_exports.cmake
#
# Looks at the dynamic symbol table (nm -D --defined-only).  Every defined
# code or data symbol (types T D B R, and weak/unique/indirect ones) must start
# with pc_; the linker's own symbols (_init, _fini, _edata, _end, __bss_start,
# ...) are ignored.  At least one pc_ symbol must be there.
cmake_minimum_required(VERSION 3.16)

if(NOT NM)
	set(NM nm)
endif()
if(NOT LIB OR NOT EXISTS "${LIB}")
	message(FATAL_ERROR "check_exports: library not found: '${LIB}'")
endif()

execute_process(COMMAND ${NM} -D --defined-only "${LIB}"
		RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
	message(FATAL_ERROR "check_exports: ${NM} -D --defined-only ${LIB} failed (${rc}): ${err}")
endif()

set(ignored _init _fini _edata _end __bss_start _etext __data_start __dso_handle
	    _DYNAMIC _GLOBAL_OFFSET_TABLE_ __gmon_start__ __cxa_finalize
	    _ITM_registerTMCloneTable _ITM_deregisterTMCloneTable)

string(REPLACE "\n" ";" lines "${out}")
set(bad "")
set(good 0)
foreach(line IN LISTS lines)
	# "<address> <type> <name>[@version]"
	if(NOT line MATCHES "^[0-9a-fA-F]* *([A-Za-z]) ([^ @]+)")
		continue()
	endif()
	set(type "${CMAKE_MATCH_1}")
	set(name "${CMAKE_MATCH_2}")
	if(NOT type MATCHES "^[TDBRGSVWiu]$")
		continue()
	endif()
	if(name IN_LIST ignored)
		continue()
	endif()
	if(name MATCHES "^pc_")
		math(EXPR good "${good} + 1")
	else()
		list(APPEND bad "${type} ${name}")
	endif()
endforeach()

if(bad)
	string(REPLACE ";" "\n  " badtext "${bad}")
	message(FATAL_ERROR "check_exports: ${LIB} exports symbols without the pc_ prefix:\n  ${badtext}\n"
			    "Mark internal functions HIDDEN or static (HIDDEN: src/lib/util.h).")
endif()
if(good EQUAL 0)
	message(FATAL_ERROR "check_exports: ${LIB} exports no pc_ symbol at all")
endif()
message(STATUS "check_exports: ${good} pc_ symbols exported, nothing else")
