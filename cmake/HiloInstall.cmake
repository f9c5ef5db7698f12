# What `cmake --install` puts under the prefix (GNUInstallDirs layout):
#
#   bin/hilo_server, bin/hilo            the server (HILO_BUILD_SERVER) and CLI
#   lib/libhilo_client.a, libhilo_proto.a
#   include/hilo/client.h, admin_client.h
#   include/hilo/v1/hilo.pb.h, hilo.grpc.pb.h   (hilo::proto's generated API)
#   lib/cmake/hilo/                      find_package(hilo CONFIG): hilo::client,
#                                        hilo::proto, and the version file
#   lib/pkgconfig/hilo-client.pc         the client for pkg-config
#   share/hilo/proto/hilo/v1/hilo.proto  the contract, for other generators
#
# Install components, which the Debian packages are cut from: "server"
# (binaries), "dev" (everything a C++ caller links against), and "systemd"
# (packaging/), which only cpack installs.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(HILO_CMAKE_INSTALL_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/hilo")

set_target_properties(hilo_client PROPERTIES EXPORT_NAME client)
set_target_properties(hilo_proto PROPERTIES EXPORT_NAME proto)

if(HILO_BUILD_SERVER)
  install(TARGETS hilo_server RUNTIME COMPONENT server)
endif()
install(TARGETS hilo_cli RUNTIME COMPONENT server)

install(TARGETS hilo_client hilo_proto
  EXPORT hiloTargets
  ARCHIVE COMPONENT dev
  INCLUDES DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}")
install(DIRECTORY "${PROJECT_SOURCE_DIR}/client_cpp/include/hilo"
  DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}" COMPONENT dev
  FILES_MATCHING PATTERN "*.h")
# The mock header is left out: it needs GoogleMock, and only hilo's tests
# use it.
install(FILES
    "${PROJECT_BINARY_DIR}/proto/gen/hilo/v1/hilo.pb.h"
    "${PROJECT_BINARY_DIR}/proto/gen/hilo/v1/hilo.grpc.pb.h"
  DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}/hilo/v1" COMPONENT dev)
install(FILES "${PROJECT_SOURCE_DIR}/proto/hilo/v1/hilo.proto"
  DESTINATION "${CMAKE_INSTALL_DATADIR}/hilo/proto/hilo/v1" COMPONENT dev)

install(EXPORT hiloTargets NAMESPACE hilo::
  DESTINATION "${HILO_CMAKE_INSTALL_DIR}" COMPONENT dev)
configure_package_config_file(
  "${CMAKE_CURRENT_LIST_DIR}/hiloConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/cmake/hiloConfig.cmake"
  INSTALL_DESTINATION "${HILO_CMAKE_INSTALL_DIR}")
# 0.x releases make no compatibility promise between minor versions.
write_basic_package_version_file(
  "${PROJECT_BINARY_DIR}/cmake/hiloConfigVersion.cmake"
  COMPATIBILITY SameMinorVersion)
install(FILES
    "${PROJECT_BINARY_DIR}/cmake/hiloConfig.cmake"
    "${PROJECT_BINARY_DIR}/cmake/hiloConfigVersion.cmake"
  DESTINATION "${HILO_CMAKE_INSTALL_DIR}" COMPONENT dev)

file(RELATIVE_PATH HILO_PC_TO_PREFIX "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
configure_file("${CMAKE_CURRENT_LIST_DIR}/hilo-client.pc.in"
  "${PROJECT_BINARY_DIR}/cmake/hilo-client.pc" @ONLY)
install(FILES "${PROJECT_BINARY_DIR}/cmake/hilo-client.pc"
  DESTINATION "${CMAKE_INSTALL_LIBDIR}/pkgconfig" COMPONENT dev)
