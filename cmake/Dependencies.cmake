# SPDX-License-Identifier: MIT
# Finds every third-party package vramflow builds against. Each one missing
# stops configuration with the Debian package that provides it; scripts/setup.sh
# installs them all.

find_package(PkgConfig)
if(NOT PKG_CONFIG_FOUND)
  message(FATAL_ERROR "pkg-config not found: install the Debian package 'pkg-config' (or run scripts/setup.sh)")
endif()

# vf_require_pkgconfig(<name> <pkg-config module> <debian package>) -> imported target vf::<name>
function(vf_require_pkgconfig name module debian)
  pkg_check_modules(VF_${name} QUIET IMPORTED_TARGET GLOBAL ${module})
  if(NOT VF_${name}_FOUND)
    message(FATAL_ERROR "${module} not found: install the Debian package '${debian}' (or run scripts/setup.sh)")
  endif()
  add_library(vf::${name} ALIAS PkgConfig::VF_${name})
endfunction()

# vf_require_package(<find_package name> <debian package> [find_package args...])
macro(vf_require_package name debian)
  find_package(${name} ${ARGN} QUIET)
  if(NOT ${name}_FOUND)
    message(FATAL_ERROR "${name} not found: install the Debian package '${debian}' (or run scripts/setup.sh)")
  endif()
endmacro()

vf_require_pkgconfig(zstd libzstd libzstd-dev)
vf_require_pkgconfig(lz4 liblz4 liblz4-dev)
vf_require_pkgconfig(xxhash libxxhash libxxhash-dev)
vf_require_pkgconfig(drm_amdgpu libdrm_amdgpu libdrm-dev)
vf_require_package(TBB libtbb-dev CONFIG)
vf_require_package(CLI11 libcli11-dev CONFIG)
vf_require_package(nlohmann_json nlohmann-json3-dev CONFIG)
vf_require_package(OpenSSL libssl-dev)
vf_require_pkgconfig(curl libcurl libcurl4-openssl-dev)
vf_require_pkgconfig(expat expat libexpat1-dev)
set(THREADS_PREFER_PTHREAD_FLAG ON)
find_package(Threads REQUIRED)
# The CRIU plugin ABI (criu/criu-plugin.h) the plugin is built against. A plugin binary matches
# one CRIU generation (docs/PLUGIN.md "ABI"): by default CRIU 4.2's header, taken from the CRIU
# source snapshot in ../shared/criu; where that is absent, the system's (Debian 12: CRIU 3.17).
# -DVRAMFLOW_CRIU_INCLUDE_DIR=DIR names any other CRIU's include directory.
set(VRAMFLOW_CRIU_INCLUDE_DIR "" CACHE PATH "directory holding criu/criu-plugin.h (empty: CRIU 4.2's from ../shared/criu, else the system's)")
set(VRAMFLOW_CRIU_SNAPSHOT "${PROJECT_SOURCE_DIR}/../shared/criu/criu-2cf8f13.tar.gz" CACHE FILEPATH
    "CRIU source snapshot whose criu-plugin.h is the default plugin ABI")
if(VRAMFLOW_CRIU_INCLUDE_DIR)
  set(CRIU_PLUGIN_INCLUDE_DIR "${VRAMFLOW_CRIU_INCLUDE_DIR}")
  if(NOT EXISTS "${CRIU_PLUGIN_INCLUDE_DIR}/criu/criu-plugin.h")
    message(FATAL_ERROR "VRAMFLOW_CRIU_INCLUDE_DIR=${CRIU_PLUGIN_INCLUDE_DIR} holds no criu/criu-plugin.h")
  endif()
elseif(EXISTS "${VRAMFLOW_CRIU_SNAPSHOT}")
  set(CRIU_PLUGIN_INCLUDE_DIR "${CMAKE_BINARY_DIR}/criu-abi/include")
  if(NOT EXISTS "${CRIU_PLUGIN_INCLUDE_DIR}/criu/criu-plugin.h")
    file(ARCHIVE_EXTRACT INPUT "${VRAMFLOW_CRIU_SNAPSHOT}" DESTINATION "${CMAKE_BINARY_DIR}/criu-abi/src"
         PATTERNS "*/criu/include/criu-plugin.h")
    file(GLOB _vf_criu_header "${CMAKE_BINARY_DIR}/criu-abi/src/*/criu/include/criu-plugin.h")
    if(NOT _vf_criu_header)
      message(FATAL_ERROR "${VRAMFLOW_CRIU_SNAPSHOT} holds no criu/include/criu-plugin.h")
    endif()
    file(COPY ${_vf_criu_header} DESTINATION "${CRIU_PLUGIN_INCLUDE_DIR}/criu")
  endif()
else()
  unset(CRIU_PLUGIN_INCLUDE_DIR CACHE)
  find_path(CRIU_PLUGIN_INCLUDE_DIR criu/criu-plugin.h)
  if(NOT CRIU_PLUGIN_INCLUDE_DIR)
    message(FATAL_ERROR "criu/criu-plugin.h not found: install the Debian package 'criu' (or run scripts/setup.sh)")
  endif()
  message(STATUS "CRIU 4.2 source snapshot not found (${VRAMFLOW_CRIU_SNAPSHOT}): building the plugin against "
                 "${CRIU_PLUGIN_INCLUDE_DIR}/criu/criu-plugin.h, whose CRIU generation it will then only load into")
endif()
message(STATUS "CRIU plugin ABI: ${CRIU_PLUGIN_INCLUDE_DIR}/criu/criu-plugin.h")
vf_require_package(Protobuf "libprotobuf-dev and protobuf-compiler")
if(VRAMFLOW_BUILD_TESTS)
  vf_require_package(GTest "libgtest-dev and libgmock-dev" CONFIG)
endif()
