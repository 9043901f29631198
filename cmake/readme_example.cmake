# cmake -DREADME=README.md -DEXAMPLE=examples/hello.c -P readme_example.cmake
# Fails unless README.md shows the example verbatim, as a ```c block.
file(READ "${README}" _readme)
file(READ "${EXAMPLE}" _example)
string(FIND "${_readme}" "```c\n${_example}```" _at)
if(_at EQUAL -1)
	message(FATAL_ERROR "${README} does not show ${EXAMPLE} verbatim: copy the file into its ```c block")
endif()
