# Style and lint. clang-format over every tracked C++ file (the tree's style is .clang-format);
# clang-tidy (.clang-tidy's checks, engine/.clang-tidy's too in engine/) over every source, as the
# `tidy` test, and over the files changed since git HEAD as the `tidy` target.
#   cmake --build --preset dev --target format       rewrites the files in place
#   the `format` test (label unit) fails on any file that differs, naming it
find_program(LATHE_CLANG_TIDY NAMES clang-tidy clang-tidy-14)
find_package(Python3 REQUIRED COMPONENTS Interpreter)
if(LATHE_CLANG_TIDY)
  # cmake --build --preset dev --target tidy      the C++ sources changed since HEAD
  add_custom_target(tidy
    COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/cmake/tidy.py ${LATHE_CLANG_TIDY}
            ${PROJECT_BINARY_DIR}
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
    COMMENT "clang-tidy: the C++ sources changed since HEAD" VERBATIM USES_TERMINAL)
  # cmake --build --preset ci --target tidy-baseline   every source; when clean, HEAD becomes the
  #                                                     baseline in .ci/tidy-baseline (commit it)
  add_custom_target(tidy-baseline
    COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/cmake/tidy.py ${LATHE_CLANG_TIDY}
            ${PROJECT_BINARY_DIR} --record-baseline --cache auto
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
    COMMENT "clang-tidy: every source, then record HEAD as the baseline" VERBATIM USES_TERMINAL)
  if(LATHE_BUILD_TESTS)
    # Every project source that differs, with the headers it reads, from the commit in
    # .ci/tidy-baseline (the last full pass), each result cached by its inputs' hash in
    # $LATHE_CACHE/tidy (default ~/.cache/lathe/tidy). A full pass, cold on 2 cores, takes about
    # 40 minutes; the baseline keeps a cold CI to what changed since it.
    add_test(NAME tidy
             COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/cmake/tidy.py ${LATHE_CLANG_TIDY}
                     ${PROJECT_BINARY_DIR} --all --since-baseline --cache auto
             WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
    set_tests_properties(tidy PROPERTIES LABELS "unit;slow" TIMEOUT 3600)
  endif()
elseif(LATHE_BUILD_TESTS)
  # The check must fail, not vanish, where clang-tidy is missing.
  message(STATUS "clang-tidy not found: the `tidy` test will fail until it is installed")
  add_test(NAME tidy COMMAND ${CMAKE_COMMAND} -E echo
           "clang-tidy not found: install it (Debian: clang-tidy) and reconfigure")
  set_tests_properties(tidy PROPERTIES LABELS unit WILL_FAIL TRUE)
endif()

find_program(LATHE_CLANG_FORMAT NAMES clang-format clang-format-14)
if(NOT LATHE_CLANG_FORMAT)
  # The check must fail, not vanish, where the formatter is missing.
  message(STATUS "clang-format not found: the `format` test will fail until it is installed")
  if(LATHE_BUILD_TESTS)
    add_test(NAME format COMMAND ${CMAKE_COMMAND} -E echo
             "clang-format not found: install it (Debian: clang-format) and reconfigure")
    set_tests_properties(format PROPERTIES LABELS unit WILL_FAIL TRUE)
  endif()
  return()
endif()
set(_lathe_format_script ${PROJECT_SOURCE_DIR}/cmake/format.sh)
add_custom_target(format
  COMMAND bash ${_lathe_format_script} ${LATHE_CLANG_FORMAT} fix
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
  COMMENT "clang-format: rewriting tracked C++ files" VERBATIM)
if(LATHE_BUILD_TESTS)
  add_test(NAME format COMMAND bash ${_lathe_format_script} ${LATHE_CLANG_FORMAT} check
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(format PROPERTIES LABELS unit TIMEOUT 120)
endif()
