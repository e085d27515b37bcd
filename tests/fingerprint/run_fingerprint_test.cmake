# Installs the build tree into a scratch prefix, builds tests/fingerprint
# against it, and edits and rebuilds it to check the code fingerprints that
# amphora_add_pipeline stamps: editing a step's function, a helper in its
# file or a header it includes reruns that step only; editing another step's
# file reruns only that one; comments and reformatting rerun nothing. Then
# the same program built without amphora_add_pipeline: keyed by the program.
# Inputs: BUILD_DIR, PROJECT_DIR, WORK_DIR.
file(REMOVE_RECURSE "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")
set(src "${WORK_DIR}/src")
set(store "${WORK_DIR}/store")

include("${CMAKE_CURRENT_LIST_DIR}/../run_support.cmake")

# Rebuilds, runs the pipeline and checks each step's status (and reason).
function(expect what alpha beta)
  run(${CMAKE_COMMAND} --build "${WORK_DIR}/build" -j2)
  run("${WORK_DIR}/build/${program}" --store "${store}" --init)
  foreach(step alpha beta)
    set(want "${${step}}")
    if(NOT last_output MATCHES "${want} +[0-9.]+ s  ${step}")
      message(FATAL_ERROR "after ${what}: expected step ${step} to be '${want}':\n${last_output}")
    endif()
  endforeach()
  message(STATUS "after ${what}: alpha ${alpha}, beta ${beta}")
  set(last_output "${last_output}" PARENT_SCOPE)
  set(last_error "${last_error}" PARENT_SCOPE)
endfunction()

function(edit file from to)
  file(READ "${src}/${file}" text)
  string(FIND "${text}" "${from}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${file} does not contain '${from}'")
  endif()
  string(REPLACE "${from}" "${to}" text "${text}")
  file(WRITE "${src}/${file}" "${text}")
endfunction()

set(program fp)
run(${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${prefix}")
file(COPY "${PROJECT_DIR}/" DESTINATION "${src}" PATTERN "*.cmake" EXCLUDE)
run(${CMAKE_COMMAND} -S "${src}" -B "${WORK_DIR}/build" -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Debug)

expect("the first build" ran ran)
if(NOT last_output MATCHES "no cache entry")
  message(FATAL_ERROR "the first run should say why it ran:\n${last_output}")
endif()
expect("nothing changed" cached cached)
# The edits that change nothing, in one rebuild.
edit(alpha.cpp "namespace {" "// A comment that changes nothing.\nnamespace {")
edit(alpha.cpp "return helper() + kAlphaOffset" "return   helper()\n      +  kAlphaOffset")
expect("a comment added to alpha.cpp and alpha.cpp reformatted" cached cached)
edit(alpha.cpp "{ return 1; }" "{ return 2; }")
expect("a helper in alpha.cpp edited" ran cached)
if(NOT last_output MATCHES "alpha  \\(code changed\\)")
  message(FATAL_ERROR "alpha should have rerun because its code changed:\n${last_output}")
endif()
edit(shared.hpp "kAlphaOffset = 10" "kAlphaOffset = 11")
expect("a header alpha.cpp includes edited" ran cached)
edit(alpha.cpp "/*ALPHA_BODY*/" "* 3")
expect("alpha's function edited" ran cached)
edit(beta.cpp "/*BETA_BODY*/" "* 5")
expect("beta.cpp edited" cached ran)
if(NOT last_output MATCHES "beta  \\(code changed\\)")
  message(FATAL_ERROR "beta should have rerun because its code changed:\n${last_output}")
endif()
message(STATUS "code fingerprints follow each step's source file")

# Built with plain add_executable, the steps have no source fingerprints:
# they are keyed by the program's build ID, never served a stale result,
# and rerun after any rebuild that changes the program, saying so.
set(program plain)
set(store "${WORK_DIR}/plain-store")
expect("the first build of the plain program" ran ran)
if(NOT last_error MATCHES "steps without source fingerprints \\(alpha, beta\\): rerunning after any rebuild")
  message(FATAL_ERROR "the plain program should say its steps have no source fingerprints:\n${last_error}")
endif()
expect("nothing changed in the plain program" cached cached)
edit(alpha.cpp "* 3" "* 7")
expect("alpha's function edited in the plain program" ran ran)
if(NOT last_output MATCHES "alpha  \\(program changed\\)" OR NOT last_output MATCHES "beta  \\(program changed\\)")
  message(FATAL_ERROR "both steps should have rerun because the program changed:\n${last_output}")
endif()
message(STATUS "steps without source fingerprints follow the program")
