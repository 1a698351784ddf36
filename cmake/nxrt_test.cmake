# Test helpers. Slow suites carry the label "slow": `ctest -LE slow` runs the fast set.
# The tests find plugins and tools in the build tree.
set(NXRT_TEST_ENV "NXRT_PLUGIN_PATH=${CMAKE_BINARY_DIR}/lib" "NXRT_BUILD_DIR=${CMAKE_BINARY_DIR}"
    "NXRT_SOURCE_DIR=${CMAKE_SOURCE_DIR}")

# Generated test data (ONNX node tests, bench models) and the Python that has onnx + numpy.
set(NXRT_TESTDATA ${CMAKE_BINARY_DIR}/testdata)
find_program(SYSTEM_PYTHON NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)

# nxrt_add_doctest(NAME SOURCES... LIBS ...): a doctest executable registered with ctest.
function(nxrt_add_doctest name)
  cmake_parse_arguments(T "" "" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE doctest::doctest ${T_LIBS})
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES ENVIRONMENT "${NXRT_TEST_ENV}")
  if(T_LABELS)
    set_tests_properties(${name} PROPERTIES LABELS "${T_LABELS}")
  endif()
endfunction()
