# Install rules shared by the whole project and the CPack packages (a .deb and a relocatable .tar.gz).
#
# Installed layout (relative to the prefix: /usr for the .deb, the unpacked folder for the tarball):
#   bin/lathe, bin/lathe-engine                    lathe finds lathe-engine beside itself
#   lib/lathe/torch/lib/*.so                        LibTorch (Debian has no LibTorch 2.x)
#   lib/lathe/nvidia/<pkg>/lib/*.so*                the CUDA libraries libtorch_cuda.so loads
#   share/lathe/presets/*.json, share/applications, share/icons/hicolor, share/metainfo
#   share/doc/lathe/                                LICENSE, copyright, third-party licences,
#                                                   README.md and docs/*.md (Help > Documentation)
#
# LibTorch keeps the wheel's own layout (torch/lib beside nvidia/*/lib) under lib/lathe/: the
# wheel's libraries carry RPATHs such as $ORIGIN/../../nvidia/cublas/lib, which then stay valid
# without rewriting; lathe-engine only needs RPATH $ORIGIN/../lib/lathe/torch/lib.
#
#   cpack -G DEB      (from a build folder; or: bash packaging/setup.sh package)
#   cpack -G TGZ

include(GNUInstallDirs)

option(LATHE_PACKAGE_TORCH_DLOPENED
  "Also carry the CUDA libraries LibTorch opens on demand (cuDNN's sub-libraries, CUDA linear algebra, NVRTC)" ON)
set(LATHE_PACKAGE_MAINTAINER "Lathe developers <maintainers@lathe.invalid>"
  CACHE STRING "Maintainer field of the .deb")
set(LATHE_PACKAGE_ARCHIVE TGZ CACHE STRING
  "CPack generator of the relocatable archive: TGZ (.tar.gz) or TZST (.tar.zst, about 8x faster to make)")
set_property(CACHE LATHE_PACKAGE_ARCHIVE PROPERTY STRINGS TGZ TZST)

install(FILES ${PROJECT_SOURCE_DIR}/LICENSE ${PROJECT_SOURCE_DIR}/README.md
        ${PROJECT_SOURCE_DIR}/packaging/copyright
        DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/lathe)
# The documentation, which Help > Documentation shows.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/lathe/docs
        FILES_MATCHING PATTERN "*.md")

# ---- LibTorch runtime -------------------------------------------------------------------------
if(TARGET lathe-engine)
  get_filename_component(_site "${LATHE_TORCH_ROOT}" DIRECTORY)
  set(_extras "")
  if(LATHE_TORCH_CUDA AND LATHE_PACKAGE_TORCH_DLOPENED)
    # Opened with dlopen, so invisible to the ELF dependency walk: cuDNN's engine libraries
    # (libcudnn.so.9 is only a dispatcher), torch's lazily loaded CUDA linear algebra and
    # NVRTC wrapper, and NVRTC's builtins.
    file(GLOB _extras
      "${LATHE_TORCH_ROOT}/lib/libtorch_cuda_linalg.so"
      "${LATHE_TORCH_ROOT}/lib/libcaffe2_nvrtc.so"
      "${_site}/nvidia/cudnn/lib/libcudnn_*.so.*"
      "${_site}/nvidia/cuda_nvrtc/lib/libnvrtc-builtins.so.*")
  endif()
  install(CODE "
    set(LATHE_ENGINE_FILE \"$<TARGET_FILE:lathe-engine>\")
    set(LATHE_TORCH_ROOT \"${LATHE_TORCH_ROOT}\")
    set(LATHE_TORCH_EXTRAS \"${_extras}\")
    set(LATHE_TORCH_DEST \"lib/lathe\")
    set(LATHE_DOC_DEST \"${CMAKE_INSTALL_DATAROOTDIR}/doc/lathe/third-party\")
    include(\"${PROJECT_SOURCE_DIR}/cmake/LatheInstallTorchRuntime.cmake\")")
endif()

# ---- CPack ------------------------------------------------------------------------------------
set(CPACK_PACKAGE_NAME lathe)
set(CPACK_PACKAGE_VENDOR "Lathe")
set(CPACK_PACKAGE_CONTACT "${LATHE_PACKAGE_MAINTAINER}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGE_DESCRIPTION
  "Lathe is a desktop workbench for training language models: edit a trainer config in a window, press Start, watch the loss fall live, checkpoint with one click, stop cleanly, resume from any checkpoint. The engine, lathe-engine, is a C++/LibTorch port of OLMo-core's trainer design; everything the GUI does is also reachable from its command line. This package carries its own copy of LibTorch ${LATHE_TORCH_VERSION} (and, when built with CUDA, the CUDA libraries it needs) under /usr/lib/lathe.")
set(CPACK_RESOURCE_FILE_LICENSE "${PROJECT_SOURCE_DIR}/LICENSE")
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_PACKAGE_CHECKSUM SHA256)
set(CPACK_STRIP_FILES ON)
set(CPACK_GENERATOR "${LATHE_PACKAGE_ARCHIVE};DEB")
set(CPACK_SOURCE_GENERATOR "")
# Compression: the packages are dominated by several GB of CUDA libraries. zstd with every core
# is several times faster than gzip at a smaller size (Debian 12's dpkg reads zstd members); the
# .tar.gz's gzip is single-threaded (measured on 2 cores: .tar.gz 392 s / 3.5 GB, .deb 87 s / 2.9 GB,
# .tar.zst 46 s / 3.0 GB).
set(CPACK_THREADS 0)
set(CPACK_DEBIAN_COMPRESSION_TYPE zstd)
set(CPACK_ARCHIVE_THREADS 0)

# Archive: lathe-0.1.0-Linux-x86_64.tar.gz, one top folder, relocatable (RPATHs are $ORIGIN-relative).
set(CPACK_PACKAGE_FILE_NAME "lathe-${PROJECT_VERSION}-${CMAKE_SYSTEM_NAME}-${CMAKE_SYSTEM_PROCESSOR}")

# Debian: lathe_0.1.0_amd64.deb, installed under /usr. Dependencies are declared by hand (checked
# by tests/packaging against the binaries' NEEDED entries): dpkg-shlibdeps would also walk the
# carried CUDA libraries, some of which need libcuda.so.1 from the NVIDIA driver.
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${LATHE_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS OFF)
set(_deb_depends "libc6 (>= 2.34)" "libgcc-s1 (>= 3.0)" "libstdc++6 (>= 12)" "libyaml-cpp0.7 (>= 0.7.0)")
if(TARGET lathe-engine)
  list(APPEND _deb_depends "libspdlog1.10-fmt9" "libfmt9 (>= 9.1.0+ds1)" "libpcre2-8-0 (>= 10.42)"
       "libsentencepiece0 (>= 0.1.97)" "libutf8proc2 (>= 2.8.0)" "libzstd1 (>= 1.5.4)"
       "zlib1g (>= 1:1.2.13)"
       "libcurl4 (>= 7.88.1)")
endif()
if(TARGET lathe)
  list(APPEND _deb_depends "libqt6core6 (>= 6.4.0)" "libqt6gui6 (>= 6.4.0)" "libqt6widgets6 (>= 6.4.0)"
       "libqt6network6 (>= 6.4.0)" "libqt6printsupport6 (>= 6.4.0)" "libqt6svg6 (>= 6.4.0)" "libqcustomplot2.1-qt6 (>= 2.1.0+dfsg1)")
endif()
# zlib1g (above, for prepare-data) also serves cuDNN's libraries in a CUDA build.
list(JOIN _deb_depends ", " CPACK_DEBIAN_PACKAGE_DEPENDS)
if(LATHE_TORCH_CUDA)
  # The NVIDIA driver (libcuda.so.1) is only needed to train on a GPU.
  set(CPACK_DEBIAN_PACKAGE_SUGGESTS "libcuda1")
endif()

include(CPack)
