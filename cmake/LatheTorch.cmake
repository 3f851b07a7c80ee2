# Finds LibTorch 2.x and defines the imported target Lathe::Torch.
#
# LATHE_TORCH_DIR (or the LATHE_LIBTORCH environment variable) may name a libtorch folder or a
# Python `torch` package folder (both hold include/ and lib/). Otherwise the setup script's cached
# virtual environment and then `python3 -c "import torch"` are tried.
#
# TorchConfig.cmake is deliberately not used: with a CUDA-enabled LibTorch (the PyPI wheel) it
# insists on a local CUDA toolkit matching the wheel's, which a CPU-only machine need not have. The
# wheel carries the CUDA runtime, cuDNN and NCCL (with headers) in its nvidia/* packages and
# libtorch_cuda.so finds them through its own RPATH, so linking needs nothing more.
set(LATHE_TORCH_VERSION_PINNED "2.13.0")
set(LATHE_TORCH_DIR "$ENV{LATHE_LIBTORCH}" CACHE PATH "libtorch folder or Python torch package folder")

function(_lathe_torch_candidates out)
  set(c)
  if(LATHE_TORCH_DIR)
    list(APPEND c ${LATHE_TORCH_DIR} ${LATHE_TORCH_DIR}/torch)
  endif()
  set(cache "$ENV{HOME}/.cache/lathe")
  if(DEFINED ENV{LATHE_CACHE})
    set(cache "$ENV{LATHE_CACHE}")
  endif()
  file(GLOB venvs "${cache}/torch-${LATHE_TORCH_VERSION_PINNED}/lib/python3*/site-packages/torch")
  list(APPEND c ${venvs})
  set(${out} ${c} PARENT_SCOPE)
endfunction()

_lathe_torch_candidates(_cands)
set(_torch_root "")
foreach(d IN LISTS _cands)
  if(EXISTS "${d}/lib/libtorch_cpu.so" AND EXISTS "${d}/include/torch/csrc/api/include/torch/torch.h")
    set(_torch_root "${d}")
    break()
  endif()
endforeach()
if(NOT _torch_root)
  find_package(Python3 COMPONENTS Interpreter QUIET)
  if(Python3_FOUND)
    execute_process(COMMAND ${Python3_EXECUTABLE} -c "import torch, os; print(os.path.dirname(torch.__file__))"
                    OUTPUT_VARIABLE _py_torch OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(_py_torch AND EXISTS "${_py_torch}/lib/libtorch_cpu.so")
      set(_torch_root "${_py_torch}")
    endif()
  endif()
endif()
if(NOT _torch_root)
  message(FATAL_ERROR "LibTorch not found: run packaging/setup.sh, or set LATHE_LIBTORCH to a libtorch folder "
                      "or a Python torch package folder (tried: ${_cands}).")
endif()

set(LATHE_TORCH_ROOT "${_torch_root}" CACHE INTERNAL "")
set(LATHE_TORCH_LIBDIR "${_torch_root}/lib" CACHE INTERNAL "")
set(LATHE_TORCH_CUDA OFF)
if(EXISTS "${_torch_root}/lib/libtorch_cuda.so")
  set(LATHE_TORCH_CUDA ON)
endif()
# Visible to every directory (the GUI's --version, the packaging rules), not only to engine/.
set(LATHE_TORCH_CUDA ${LATHE_TORCH_CUDA} CACHE INTERNAL "")

# The LibTorch version as the engine's TORCH_VERSION spells it (torch/version.h), else the
# wheel's version.py without its local tag (2.9.1+cu128 -> 2.9.1).
set(_torch_version "unknown")
# (torch/headeronly/version.h since 2.10; torch/csrc/api/include/torch/version.h before.)
set(_version_h "")
foreach(_candidate include/torch/headeronly/version.h include/torch/csrc/api/include/torch/version.h)
  if(NOT _version_h AND EXISTS "${_torch_root}/${_candidate}")
    file(STRINGS "${_torch_root}/${_candidate}" _vlines REGEX "#define TORCH_VERSION_(MAJOR|MINOR|PATCH) ")
    if(_vlines)
      set(_version_h "${_torch_root}/${_candidate}")
    endif()
  endif()
endforeach()
if(_version_h)
  file(STRINGS "${_version_h}" _vlines REGEX "#define TORCH_VERSION_(MAJOR|MINOR|PATCH) ")
  if(_vlines MATCHES "MAJOR ([0-9]+).*MINOR ([0-9]+).*PATCH ([0-9]+)")
    set(_torch_version "${CMAKE_MATCH_1}.${CMAKE_MATCH_2}.${CMAKE_MATCH_3}")
  endif()
elseif(EXISTS "${_torch_root}/version.py")
  file(STRINGS "${_torch_root}/version.py" _vline REGEX "^__version__")
  if(_vline MATCHES "'([0-9.]+)")
    set(_torch_version "${CMAKE_MATCH_1}")
  endif()
endif()
set(LATHE_TORCH_VERSION "${_torch_version}" CACHE INTERNAL "")

# The C++ ABI LibTorch was built with (the wheels use the new ABI since 2.7).
set(_abi 1)
if(EXISTS "${_torch_root}/share/cmake/Torch/TorchConfig.cmake")
  file(STRINGS "${_torch_root}/share/cmake/Torch/TorchConfig.cmake" _abi_line REGEX "GLIBCXX_USE_CXX11_ABI=[01]")
  if(_abi_line MATCHES "GLIBCXX_USE_CXX11_ABI=([01])")
    set(_abi ${CMAKE_MATCH_1})
  endif()
endif()

# Gloo's headers are not shipped in the wheel; Debian's libgloo-dev provides them (checked against 2.9).
find_path(LATHE_GLOO_INCLUDE gloo/algorithm.h PATHS ${_torch_root}/include /usr/include)
if(NOT LATHE_GLOO_INCLUDE)
  message(FATAL_ERROR "Gloo headers not found: install libgloo-dev (packaging/setup.sh does).")
endif()

add_library(Lathe::Torch INTERFACE IMPORTED)
set(_libs ${_torch_root}/lib/libtorch.so ${_torch_root}/lib/libtorch_cpu.so ${_torch_root}/lib/libc10.so)
set(_defs _GLIBCXX_USE_CXX11_ABI=${_abi} USE_C10D_GLOO USE_DISTRIBUTED)
set(_incs ${_torch_root}/include ${_torch_root}/include/torch/csrc/api/include)
if(LATHE_TORCH_CUDA)
  list(APPEND _libs ${_torch_root}/lib/libtorch_cuda.so ${_torch_root}/lib/libc10_cuda.so)
  list(APPEND _defs LATHE_WITH_CUDA USE_C10D_NCCL USE_CUDA)
  # CUDA runtime and NCCL headers from the wheel's nvidia packages, else from a CUDA toolkit.
  get_filename_component(_site ${_torch_root} DIRECTORY)
  # Every nvidia/* package's headers (runtime, NCCL, cuBLAS, cuSOLVER, ...) ahead of any system
  # CUDA headers, which may belong to another CUDA version.
  file(GLOB _nv_incs ${_site}/nvidia/*/include)
  list(APPEND _incs ${_nv_incs})
  if(NOT EXISTS ${_site}/nvidia/cuda_runtime/include/cuda_runtime_api.h)
    find_package(CUDAToolkit QUIET)
    if(CUDAToolkit_FOUND)
      list(APPEND _incs ${CUDAToolkit_INCLUDE_DIRS})
    else()
      message(FATAL_ERROR "LibTorch has CUDA but no CUDA runtime headers were found (nvidia-cuda-runtime wheel or CUDA toolkit).")
    endif()
  endif()
  set(_rpath_extra "")
endif()
set_target_properties(Lathe::Torch PROPERTIES
  INTERFACE_INCLUDE_DIRECTORIES "${_incs}"
  INTERFACE_SYSTEM_INCLUDE_DIRECTORIES "${_incs};${LATHE_GLOO_INCLUDE}"
  INTERFACE_COMPILE_DEFINITIONS "${_defs}"
  INTERFACE_LINK_LIBRARIES "-Wl,--no-as-needed;${_libs};-Wl,--as-needed;Threads::Threads"
  # The wheel's libtorch*.so export parts of a newer libstdc++ (std::filesystem among them) that
  # crash when our code binds to them. Putting libstdc++ first among the needed libraries makes
  # every std:: symbol resolve to the system's copy.
  INTERFACE_LINK_OPTIONS "LINKER:--push-state,--no-as-needed,-lstdc++,--pop-state")
message(STATUS "LibTorch ${LATHE_TORCH_VERSION}: ${_torch_root} (CUDA: ${LATHE_TORCH_CUDA}, CXX11 ABI: ${_abi})")

# The Python of the setup script's virtual environment (when LibTorch came from there): the tests
# use it for independent checks (jsonschema, TensorBoard's reader).
get_filename_component(_venv "${_torch_root}/../../../.." ABSOLUTE)
if(EXISTS "${_venv}/bin/python")
  set(LATHE_TEST_PYTHON "${_venv}/bin/python" CACHE FILEPATH "Python with jsonschema and tensorboard, for tests")
else()
  find_program(LATHE_TEST_PYTHON python3)
endif()
