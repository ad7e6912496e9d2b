# Draws the lossy sample capture and requires the README's picture to be that drawing byte for
# byte, so the picture shows what rnic-pcap --plot draws today.
execute_process(COMMAND ${RNIC_PCAP} --quiet --plot ${OUT} ${CAPTURE} RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "rnic-pcap --plot failed: ${rc}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${OUT} ${EXPECTED} RESULT_VARIABLE diff)
if(NOT diff EQUAL 0)
  message(FATAL_ERROR "${OUT} differs from ${EXPECTED}: if the change is intended, regenerate it with "
                      "rnic-pcap --quiet --plot ${EXPECTED} ${CAPTURE}")
endif()
