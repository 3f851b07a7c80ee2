# One helper registers every test:
#   lathe_add_test(NAME SOURCES... LIBS... LABELS... [TIMEOUT s] [ENV k=v...] [WRAP cmd...])
# Tests are Qt Test executables run through CTest; each carries labels (unit, distributed, gui, e2e, slow).
find_package(Qt6 REQUIRED COMPONENTS Core Network Test)

function(lathe_add_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "SOURCES;LIBS;LABELS;ENV;WRAP" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE Qt6::Test ${T_LIBS})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR})
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/tests AUTOMOC ON)
  lathe_set_warnings(${name})
  # Tests on the LibTorch side precompile its headers, as the engine's libraries do.
  if(LATHE_PCH AND "${T_LIBS}" MATCHES "lathe_(train|model|data|metrics|checkpoint|distributed)")
    target_precompile_headers(${name} PRIVATE <torch/torch.h>)
  endif()
  # WRAP runs the test inside another command, e.g. xvfb-run -a for tests that need an X server.
  add_test(NAME ${name} COMMAND ${T_WRAP} $<TARGET_FILE:${name}>)
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  if(NOT T_LABELS)
    set(T_LABELS unit)
  endif()
  set_tests_properties(${name} PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT}
    ENVIRONMENT "QT_QPA_PLATFORM=offscreen;LATHE_SOURCE_DIR=${PROJECT_SOURCE_DIR};LATHE_BIN_DIR=${PROJECT_BINARY_DIR}/bin;${T_ENV}")
endfunction()
