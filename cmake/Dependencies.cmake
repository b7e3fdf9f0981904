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
set(THREADS_PREFER_PTHREAD_FLAG ON)
find_package(Threads REQUIRED)
find_path(CRIU_PLUGIN_INCLUDE_DIR criu/criu-plugin.h)
if(NOT CRIU_PLUGIN_INCLUDE_DIR)
  message(FATAL_ERROR "criu/criu-plugin.h not found: install the Debian package 'criu' (or run scripts/setup.sh)")
endif()
vf_require_package(Protobuf "libprotobuf-dev and protobuf-compiler")
if(VRAMFLOW_BUILD_TESTS)
  vf_require_package(GTest "libgtest-dev and libgmock-dev" CONFIG)
endif()
