# Registers a Catch2 executable's tests with CTest and, when a sanitizer tree is configured,
# the same executable from that tree as one more test, so one CTest run covers both builds.
#   rnic_add_catch_tests(TARGET <target> PREFIX "<prefix>: " [SANITIZER_SPEC "<Catch2 test spec>"])
# SANITIZER_SPEC limits the sanitizer run to some cases, for executables whose every case runs
# the same code for longer (ten times slower under ASan than the gain in coverage is worth).
function(rnic_add_catch_tests)
  cmake_parse_arguments(ARG "" "TARGET;PREFIX;SANITIZER_SPEC" "" ${ARGN})
  include(Catch)
  catch_discover_tests(${ARG_TARGET} TEST_PREFIX "${ARG_PREFIX}" PROPERTIES LABELS unit)
  if(RNIC_SANITIZER_BUILD_DIR)
    file(RELATIVE_PATH rel ${CMAKE_BINARY_DIR} ${CMAKE_CURRENT_BINARY_DIR})
    set(name "asan+ubsan: ${ARG_TARGET}")
    add_test(NAME "${name}" COMMAND ${RNIC_SANITIZER_BUILD_DIR}/${rel}/${ARG_TARGET} ${ARG_SANITIZER_SPEC})
    set_tests_properties("${name}" PROPERTIES
      LABELS "unit;sanitizer"
      ENVIRONMENT "ASAN_OPTIONS=detect_leaks=1:abort_on_error=1;UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1")
  endif()
endfunction()
