# What the CMake-script tests share (tests/consumer, tests/fingerprint).

# Runs a command; fails the test with its output unless it exits 0. Leaves
# its standard output in `last_output`, its standard error in `last_error`.
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "command failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
  set(last_error "${err}" PARENT_SCOPE)
endfunction()
