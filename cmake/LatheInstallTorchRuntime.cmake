# Runs at install time (install(CODE) in LathePackaging.cmake): copies the LibTorch runtime that
# lathe-engine needs into <prefix>/${LATHE_TORCH_DEST}, keeping its layout relative to the folder
# holding LibTorch (for the PyPI wheel: site-packages, so torch/lib/ and nvidia/<pkg>/lib/).
#
# Inputs: LATHE_ENGINE_FILE (the built lathe-engine), LATHE_TORCH_ROOT (LibTorch's folder),
# LATHE_TORCH_EXTRAS (libraries LibTorch opens with dlopen), LATHE_TORCH_DEST, LATHE_DOC_DEST.
# What is carried: the ELF dependency closure of lathe-engine and of the extras, restricted to
# LibTorch's folder and the wheel's nvidia/ folder. Everything else must come from Debian
# (checked by tests/packaging); the NVIDIA driver (libcuda.so.1) is the only allowed absentee.

get_filename_component(_root "${LATHE_TORCH_ROOT}" ABSOLUTE)
get_filename_component(_base "${_root}" DIRECTORY)
string(REGEX REPLACE "([][+.*()^$?|\\\\])" "\\\\\\1" _root_re "${_root}")
string(REGEX REPLACE "([][+.*()^$?|\\\\])" "\\\\\\1" _base_re "${_base}")

file(GET_RUNTIME_DEPENDENCIES
  EXECUTABLES "${LATHE_ENGINE_FILE}"
  LIBRARIES ${LATHE_TORCH_EXTRAS}
  RESOLVED_DEPENDENCIES_VAR _resolved
  UNRESOLVED_DEPENDENCIES_VAR _unresolved
  CONFLICTING_DEPENDENCIES_PREFIX _conflict
  PRE_EXCLUDE_REGEXES "^libcuda\\.so" "^libnvidia-"
  POST_INCLUDE_REGEXES "^${_root_re}/" "^${_base_re}/nvidia/"
  POST_EXCLUDE_REGEXES ".*")
if(_unresolved)
  message(FATAL_ERROR "LibTorch runtime: unresolved libraries: ${_unresolved}")
endif()

# The wheel's RPATHs reach one library by several spellings (torch/lib/../../nvidia/...,
# nvidia/cusparse/lib/../../nvjitlink/...): a conflict only if they are different files.
foreach(name IN LISTS _conflict_FILENAMES)
  set(_paths "")
  foreach(f IN LISTS _conflict_${name})
    get_filename_component(f "${f}" REALPATH)
    list(APPEND _paths "${f}")
  endforeach()
  list(REMOVE_DUPLICATES _paths)
  list(LENGTH _paths _np)
  if(_np GREATER 1)
    message(FATAL_ERROR "LibTorch runtime: ${name} found at several places: ${_paths}")
  endif()
  list(GET _conflict_${name} 0 _first)
  list(APPEND _resolved "${_first}")
endforeach()

set(_files ${LATHE_TORCH_EXTRAS})
foreach(f IN LISTS _resolved)
  get_filename_component(f "${f}" ABSOLUTE)  # folds the wheel's ../../nvidia/... into a plain path
  list(APPEND _files "${f}")
endforeach()
list(REMOVE_DUPLICATES _files)
list(SORT _files)

set(_packages "")
foreach(f IN LISTS _files)
  file(RELATIVE_PATH rel "${_base}" "${f}")
  if(rel MATCHES "^\\.\\./")
    message(FATAL_ERROR "LibTorch runtime: ${f} lies outside ${_base}")
  endif()
  get_filename_component(reldir "${rel}" DIRECTORY)
  file(INSTALL DESTINATION "${CMAKE_INSTALL_PREFIX}/${LATHE_TORCH_DEST}/${reldir}"
       TYPE SHARED_LIBRARY FOLLOW_SYMLINK_CHAIN FILES "${f}")
  if(rel MATCHES "^nvidia/([^/]+)/")
    list(APPEND _packages "nvidia_${CMAKE_MATCH_1}")
  endif()
endforeach()
list(LENGTH _files _n)
message(STATUS "LibTorch runtime: ${_n} libraries from ${_base}")

# The licences of what was carried: LibTorch's and each NVIDIA wheel's (when they come from wheels).
list(REMOVE_DUPLICATES _packages)
get_filename_component(_torch_name "${_root}" NAME)
foreach(pkg IN ITEMS ${_torch_name} ${_packages})
  file(GLOB _dist "${_base}/${pkg}-*.dist-info" "${_base}/${pkg}_cu*-*.dist-info")
  foreach(d IN LISTS _dist)
    file(GLOB_RECURSE _lic "${d}/LICENSE*" "${d}/License*" "${d}/NOTICE*")
    if(_lic)
      file(INSTALL DESTINATION "${CMAKE_INSTALL_PREFIX}/${LATHE_DOC_DEST}/${pkg}" TYPE FILE FILES ${_lic})
    endif()
  endforeach()
endforeach()
