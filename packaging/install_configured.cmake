# SPDX-License-Identifier: MIT
# Included by the install script (packaging/CMakeLists.txt): writes the man
# pages and the systemd units for the prefix being installed to
# (CMAKE_INSTALL_PREFIX as the install step sees it) and installs them
# (file(INSTALL) honours DESTDIR).
macro(vramflow_install_path out dir)
  if(IS_ABSOLUTE "${dir}")
    set(${out} "${dir}")
  else()
    set(${out} "${CMAKE_INSTALL_PREFIX}/${dir}")
  endif()
endmacro()
vramflow_install_path(VRAMFLOW_BINDIR_FULL "${CMAKE_INSTALL_BINDIR}")
vramflow_install_path(CMAKE_INSTALL_FULL_LIBDIR_CRIU "${VRAMFLOW_CRIU_PLUGIN_DIR}")
vramflow_install_path(SYSTEMD_UNIT_DIR "${VRAMFLOW_SYSTEMD_UNIT_DIR}")
vramflow_install_path(DOC_DIR "${VRAMFLOW_DOC_DIR}")
foreach(entry ${_vf_configured})
  string(REPLACE "|" ";" entry "${entry}")
  list(GET entry 0 source)
  list(GET entry 1 destination)
  string(REGEX REPLACE "\\.in$" "" output "${source}")
  configure_file("${_vf_source_dir}/${source}" "${_vf_work_dir}/${output}" @ONLY)
  vramflow_install_path(destination "${destination}")
  file(INSTALL DESTINATION "${destination}" TYPE FILE FILES "${_vf_work_dir}/${output}")
endforeach()
