# `cmake --install` layout (GNUInstallDirs), the CMake package (find_package(nxrt CONFIG):
# nxrt::abi, nxrt::sdk, nxrt::runtime, nxrt_add_ep_plugin) and the pkg-config file.
#   bin/nxrt, bin/nxrt-conformance            <libdir>/libnxrt.so
#   <libdir>/nxrt/libnxrt_ep_*.so             (found by libnxrt relative to itself)
#   include/nxrt/ (C, C++ API)  include/nxrt_ep.h, nxrt_dtype.h, nxrt_native.h (ABI)  include/nxrt_sdk/
#   <libdir>/cmake/nxrt/  <libdir>/pkgconfig/nxrt.pc  <datadir>/nxrt/ (plugin.map, data generators, samples/)
# Components: runtime (libnxrt, CLI, conformance, CPU plugin), vulkan (its plugin), dev
# (headers, SDK, CMake and pkg-config files), python (the nxrt module).
include(CMakePackageConfigHelpers)

set(NXRT_INSTALL_PLUGINDIR ${CMAKE_INSTALL_LIBDIR}/nxrt)
set(NXRT_INSTALL_DATADIR ${CMAKE_INSTALL_DATADIR}/nxrt)
set(NXRT_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/nxrt)

# Executables find libnxrt relative to themselves, so any prefix (a temporary one, a
# package unpacked anywhere) works without LD_LIBRARY_PATH.
file(RELATIVE_PATH _bin_to_lib /${CMAKE_INSTALL_BINDIR} /${CMAKE_INSTALL_LIBDIR})
file(RELATIVE_PATH _bin_to_plugins /${CMAKE_INSTALL_BINDIR} /${NXRT_INSTALL_PLUGINDIR})
file(RELATIVE_PATH _bin_to_data /${CMAKE_INSTALL_BINDIR} /${NXRT_INSTALL_DATADIR})
set_target_properties(nxrt_cli nxrt-conformance PROPERTIES INSTALL_RPATH "$ORIGIN/${_bin_to_lib}")
target_compile_definitions(nxrt-conformance PRIVATE NXRT_CONF_INSTALLED_PLUGIN_DIR="${_bin_to_plugins}"
                                                    NXRT_CONF_INSTALLED_DATA_DIR="${_bin_to_data}")

install(TARGETS nxrt_abi nxrt_sdk EXPORT nxrtTargets COMPONENT dev)
install(TARGETS nxrt EXPORT nxrtTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime)
install(TARGETS nxrt_cli nxrt-conformance RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
install(TARGETS nxrt_ep_cpu LIBRARY DESTINATION ${NXRT_INSTALL_PLUGINDIR} COMPONENT runtime)
if(TARGET nxrt_ep_vulkan)
  install(TARGETS nxrt_ep_vulkan LIBRARY DESTINATION ${NXRT_INSTALL_PLUGINDIR} COMPONENT vulkan)
endif()
if(TARGET nxrt_ep_cuda)
  install(TARGETS nxrt_ep_cuda LIBRARY DESTINATION ${NXRT_INSTALL_PLUGINDIR} COMPONENT cuda)
endif()
# The generators nxrt-conformance runs for its ops and models suites when no data is given.
install(FILES ${PROJECT_SOURCE_DIR}/tools/gen_onnx_node_tests.py ${PROJECT_SOURCE_DIR}/tools/gen_bench_models.py
        DESTINATION ${NXRT_INSTALL_DATADIR}/tools COMPONENT runtime)

install(FILES ${PROJECT_SOURCE_DIR}/abi/nxrt_ep.h ${PROJECT_SOURCE_DIR}/abi/nxrt_dtype.h ${PROJECT_SOURCE_DIR}/abi/nxrt_native.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev)
# The headers only (each folder's README.md stays in the tree).
install(DIRECTORY ${PROJECT_SOURCE_DIR}/host/include/nxrt ${PROJECT_SOURCE_DIR}/sdk/include/nxrt_sdk
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev FILES_MATCHING PATTERN "*.h" PATTERN "*.hpp")
install(FILES ${PROJECT_SOURCE_DIR}/sdk/plugin.map DESTINATION ${NXRT_INSTALL_DATADIR} COMPONENT dev)
# The samples a vendor starts from (docs/plugin-guide.md copies ep_minimal out of here).
install(DIRECTORY ${PROJECT_SOURCE_DIR}/samples/ep_minimal ${PROJECT_SOURCE_DIR}/samples/ep_device
                  ${PROJECT_SOURCE_DIR}/samples/host_embed
        DESTINATION ${NXRT_INSTALL_DATADIR}/samples COMPONENT dev)

install(EXPORT nxrtTargets NAMESPACE nxrt:: DESTINATION ${NXRT_INSTALL_CMAKEDIR} COMPONENT dev)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/nxrtConfig.cmake.in ${PROJECT_BINARY_DIR}/nxrtConfig.cmake
                              INSTALL_DESTINATION ${NXRT_INSTALL_CMAKEDIR} PATH_VARS NXRT_INSTALL_DATADIR)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/nxrtConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/nxrtConfig.cmake ${PROJECT_BINARY_DIR}/nxrtConfigVersion.cmake
              ${PROJECT_SOURCE_DIR}/cmake/nxrt_plugin.cmake
        DESTINATION ${NXRT_INSTALL_CMAKEDIR} COMPONENT dev)

# pkg-config: `nxrt` (embedding: -lnxrt) and `nxrt-sdk` (plugins: headers, fmt).
# The prefix is relative to the .pc file, so `cmake --install --prefix X` and unpacked packages work.
file(RELATIVE_PATH _pc_to_prefix /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
string(REGEX REPLACE "/$" "" _pc_to_prefix "${_pc_to_prefix}")
set(NXRT_PC_PREFIX "\${pcfiledir}/${_pc_to_prefix}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/nxrt.pc.in ${PROJECT_BINARY_DIR}/nxrt.pc @ONLY)
configure_file(${PROJECT_SOURCE_DIR}/cmake/nxrt-sdk.pc.in ${PROJECT_BINARY_DIR}/nxrt-sdk.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/nxrt.pc ${PROJECT_BINARY_DIR}/nxrt-sdk.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)
