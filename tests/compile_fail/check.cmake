# Compiles SOURCE, which must fail, and checks that the first error line the
# compiler prints matches the regular expression on the source's
# "// EXPECT: " line: the first thing a user reads is Amphora's message.
#   cmake -DCXX=... -DINCLUDES="dir|dir|..." -DSOURCE=file.cpp -P check.cmake
file(STRINGS "${SOURCE}" expect_lines REGEX "^// EXPECT: ")
list(GET expect_lines 0 expect)
string(REGEX REPLACE "^// EXPECT: " "" expect "${expect}")
string(REPLACE "|" ";" include_list "${INCLUDES}")
set(flags -std=c++20 -fsyntax-only -Wall -Wextra)
foreach(dir IN LISTS include_list)
  if(dir)
    list(APPEND flags "-I${dir}")
  endif()
endforeach()
execute_process(COMMAND "${CXX}" ${flags} "${SOURCE}" RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(status EQUAL 0)
  message(FATAL_ERROR "${SOURCE} compiled, but must not")
endif()
string(REGEX MATCH "[^\n]*error: [^\n]*" first "${err}")
if(NOT first MATCHES "${expect}")
  message(FATAL_ERROR "${SOURCE}: the first error is\n  ${first}\nnot a match for\n  ${expect}\nWhole output:\n${err}")
endif()
message(STATUS "${SOURCE}: first error as expected")
