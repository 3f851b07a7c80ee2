# Version and git revision, baked into lathe_config's version.cpp at configure time.
find_package(Git QUIET)
set(LATHE_GIT_REVISION "unknown")
if(GIT_FOUND AND EXISTS ${PROJECT_SOURCE_DIR}/.git)
  execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --short=12 HEAD
                  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
                  OUTPUT_VARIABLE _rev OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE _rc)
  if(_rc EQUAL 0 AND _rev)
    set(LATHE_GIT_REVISION ${_rev})
  endif()
endif()
