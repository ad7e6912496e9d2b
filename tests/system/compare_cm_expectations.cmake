# Regenerates golden_cm_expectations.tsv from tshark and requires it to equal the committed file:
# the values test_golden_cm.cpp checks stay the ones Wireshark's dissector reads from the captures.
execute_process(COMMAND ${PYTHON} ${GEN} ${GOLDEN} OUTPUT_FILE ${OUT} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "gen_golden_cm_expectations.py failed: ${rc}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${OUT} ${EXPECTED} RESULT_VARIABLE diff)
if(NOT diff EQUAL 0)
  message(FATAL_ERROR "${OUT} differs from ${EXPECTED}: tshark reads the captures differently now")
endif()
