# Regenerates the sample capture and requires it to equal the committed pcaps/ file byte for
# byte: any change in what the builder emits shows up here and in review.
execute_process(COMMAND ${GEN} ${OUT} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "rnic-gen-pcap failed: ${rc}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${OUT} ${EXPECTED} RESULT_VARIABLE diff)
if(NOT diff EQUAL 0)
  message(FATAL_ERROR "${OUT} differs from ${EXPECTED}: regenerate it with rnic-gen-pcap if the change is intended")
endif()
