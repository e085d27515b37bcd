# Installs the build tree into a scratch prefix, builds tests/newcomer
# against it with -Wall -Wextra -Werror, saves both cases, loads them in
# fresh processes and in Python. Inputs: BUILD_DIR, PROJECT_DIR, WORK_DIR,
# READER_DIR, PYTHON.
file(REMOVE_RECURSE "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")
set(store "${WORK_DIR}/store")

include("${CMAKE_CURRENT_LIST_DIR}/../run_support.cmake")

run(${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${prefix}")
run(${CMAKE_COMMAND} -S "${PROJECT_DIR}" -B "${WORK_DIR}/build" -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release)
run(${CMAKE_COMMAND} --build "${WORK_DIR}/build" -j2)
foreach(program menpo_bundle icevision_records)
  run("${WORK_DIR}/build/${program}" save "${store}")
  run("${WORK_DIR}/build/${program}" load "${store}")
endforeach()
run("${prefix}/bin/amphora" --store "${store}" verify)
run("${PYTHON}" "${PROJECT_DIR}/check.py" "${store}" "${READER_DIR}")
message(STATUS "the newcomer cases build against the installed package and load in C++ and Python")
