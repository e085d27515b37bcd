# Installs the build tree into a scratch prefix, then configures, builds and
# runs tests/consumer against it. Inputs: BUILD_DIR, CONSUMER_DIR, WORK_DIR.
file(REMOVE_RECURSE "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")

include("${CMAKE_CURRENT_LIST_DIR}/../run_support.cmake")

run(${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${prefix}")
foreach(f include/amphora/store.hpp include/amphora/tensor.hpp include/amphora/storage/medium.hpp
          include/amphora/run_main.hpp include/amphora/version.hpp bin/amphora)
  if(NOT EXISTS "${prefix}/${f}")
    message(FATAL_ERROR "install is missing ${f}")
  endif()
endforeach()
run(${CMAKE_COMMAND} -S "${CONSUMER_DIR}" -B "${WORK_DIR}/build" -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release)
run(${CMAKE_COMMAND} --build "${WORK_DIR}/build" -j2)
run("${WORK_DIR}/build/consumer" "${WORK_DIR}/store")
run("${WORK_DIR}/build/consumer_framework" "${WORK_DIR}/store")
run("${WORK_DIR}/build/consumer_tensor_only")
run("${prefix}/bin/amphora" --store "${WORK_DIR}/store" verify)
message(STATUS "installed package builds and runs a consumer")
