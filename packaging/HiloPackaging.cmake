# The Debian packages, made by `cpack` in a build directory (CPack's DEB
# generator; dpkg-shlibdeps from dpkg-dev fills in Depends):
#
#   hilo-server         hilo_server, the hilo CLI, the systemd unit,
#                       /etc/default/hilo (the flags), the hilo system user
#                       (sysusers.d, created by postinst)
#   libhilo-client-dev  the client library, its headers, the CMake package,
#                       the pkg-config file, the proto
#
# Both carry PROJECT_VERSION with Debian revision 1. The files below only
# enter the packages: `cmake --install` into a prefix leaves them out
# (EXCLUDE_FROM_ALL), since a unit, /etc/default and sysusers.d belong to the
# system, not to a prefix.
if(NOT HILO_BUILD_SERVER)
  return()
endif()

set(_hilo_pkg "${CMAKE_CURRENT_LIST_DIR}")

install(FILES "${_hilo_pkg}/hilo.service"
  DESTINATION /lib/systemd/system COMPONENT server EXCLUDE_FROM_ALL)
install(FILES "${_hilo_pkg}/hilo.default" RENAME hilo
  DESTINATION /etc/default COMPONENT server EXCLUDE_FROM_ALL)
install(FILES "${_hilo_pkg}/hilo.sysusers" RENAME hilo.conf
  DESTINATION lib/sysusers.d COMPONENT server EXCLUDE_FROM_ALL)
# Each package's /usr/share/doc: copyright, the README, CHANGELOG.md as the
# upstream changelog.gz and a one-entry changelog.Debian.gz, compressed
# without timestamps (gzip -n) as Debian wants them.
set(CPACK_RESOURCE_FILE_LICENSE "${PROJECT_SOURCE_DIR}/LICENSE")
set(CPACK_PACKAGE_CONTACT
    "hilo maintainers <maintainers@users.noreply.a-seed-ff12b63f.example>")
set(_hilo_doc "${PROJECT_BINARY_DIR}/packaging/doc")
string(TIMESTAMP HILO_PACKAGE_DATE "%a, %d %b %Y %H:%M:%S +0000" UTC)
configure_file("${_hilo_pkg}/debian/changelog.in"
  "${_hilo_doc}/changelog.Debian" @ONLY)
configure_file("${PROJECT_SOURCE_DIR}/CHANGELOG.md" "${_hilo_doc}/changelog"
  COPYONLY)
find_program(HILO_GZIP gzip REQUIRED)
foreach(_hilo_file changelog.Debian changelog)
  execute_process(COMMAND "${HILO_GZIP}" -9nf "${_hilo_doc}/${_hilo_file}"
    COMMAND_ERROR_IS_FATAL ANY)
endforeach()
foreach(_hilo_deb hilo-server libhilo-client-dev)
  if(_hilo_deb STREQUAL "hilo-server")
    set(_hilo_component server)
  else()
    set(_hilo_component dev)
  endif()
  install(FILES "${_hilo_pkg}/debian/copyright"
      "${PROJECT_SOURCE_DIR}/README.md"
      "${_hilo_doc}/changelog.gz" "${_hilo_doc}/changelog.Debian.gz"
    DESTINATION "share/doc/${_hilo_deb}" COMPONENT ${_hilo_component}
    EXCLUDE_FROM_ALL)
endforeach()

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME hilo)
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL server dev)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)

set(CPACK_DEBIAN_SERVER_PACKAGE_NAME hilo-server)
set(CPACK_DEBIAN_SERVER_PACKAGE_SECTION net)
# Depends: the shared libraries hilo_server and hilo link, found by
# dpkg-shlibdeps, and whatever runs sysusers.d files for postinst.
set(CPACK_DEBIAN_SERVER_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_SERVER_PACKAGE_DEPENDS "systemd-sysusers")
set(CPACK_DEBIAN_SERVER_PACKAGE_CONTROL_EXTRA
    "${_hilo_pkg}/debian/postinst;${_hilo_pkg}/debian/postrm;${_hilo_pkg}/debian/conffiles")
set(CPACK_DEBIAN_SERVER_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_COMPONENT_SERVER_DESCRIPTION
"HiLo ID service: unique IDs handed out in ranges over gRPC
hilo_server hands each client a range of numbers per collection, stored
durably in SQLite (or a shared PostgreSQL database) before the reply leaves,
so no ID is handed out twice, across restarts and crashes. This package has
the server, the hilo command-line tool and a hardened systemd unit (hilo),
whose flags are in /etc/default/hilo.")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libhilo-client-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
# Static libraries: a caller compiles against these libraries' headers and
# links them itself (find_package(hilo) finds them with find_dependency).
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
    "libgrpc++-dev, libprotobuf-dev, libabsl-dev")
set(CPACK_COMPONENT_DEV_DESCRIPTION
"C++ client of the hilo ID service (static library and headers)
hilo::Client draws IDs from hilo servers: a cached range per collection, a
lock-free fast path, failover between servers and the unused rest of each
range handed back. This package has the static libraries, their headers, the
CMake package (find_package(hilo): hilo::client, hilo::proto), a pkg-config
file (hilo-client) and the proto, under /usr/share/hilo/proto.")

include(CPack)
