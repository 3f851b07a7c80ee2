# Compiler setup shared by every Lathe target: warnings, ccache, position-independent code.
if(LATHE_USE_CCACHE)
  find_program(LATHE_CCACHE ccache)
  if(LATHE_CCACHE)
    set(CMAKE_CXX_COMPILER_LAUNCHER ${LATHE_CCACHE})
    set(CMAKE_CUDA_COMPILER_LAUNCHER ${LATHE_CCACHE})
  endif()
endif()


# Applied per target (no global flags): lathe_set_warnings(target)
function(lathe_set_warnings target)
  target_compile_options(${target} PRIVATE "$<$<COMPILE_LANGUAGE:CXX>:-Wall;-Wextra;-Wshadow>")
  target_compile_definitions(${target} PRIVATE QT_NO_KEYWORDS)
endfunction()
