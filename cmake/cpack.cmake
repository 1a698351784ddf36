# .deb packages from the install components (cmake/install.cmake): `cpack -G DEB` in the build dir.
#   nxrt         runtime: libnxrt, nxrt, nxrt-conformance, the CPU plugin (<libdir>/nxrt)
#   nxrt-vulkan  the Vulkan plugin        nxrt-cuda  the CUDA plugin, when it is built
#   nxrt-dev     headers, SDK, CMake package, pkg-config files
#   python3-nxrt the nxrt Python package (when pybind11 was found)
# Installed under /usr, so libnxrt is on the default library path and finds the plugins in
# /usr/lib/nxrt by itself.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME nxrt)
set(CPACK_PACKAGE_VENDOR "nxrt")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "ONNX inference host with plugin execution providers")
set(CPACK_PACKAGE_CONTACT "nxrt maintainers <nxrt@localhost>")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_COMPRESSION_TYPE gzip)  # quick to build in CI; xz saves little on these
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE amd64)

set(_v "(= ${PROJECT_VERSION})")
set(CPACK_COMPONENTS_ALL runtime dev)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME nxrt)
# Debian 12 package names of what libnxrt and the plugins link (ldd), fixed rather than
# dpkg-shlibdeps so the build needs no dpkg-dev.
set(CPACK_DEBIAN_RUNTIME_PACKAGE_DEPENDS
    "libonnx1, libprotobuf32, libboost-filesystem1.74.0, libfmt9, libstdc++6, libgcc-s1, libc6, zlib1g")
set(CPACK_DEBIAN_RUNTIME_PACKAGE_RECOMMENDS "python3-onnx, python3-numpy")  # nxrt-conformance's data generators
set(CPACK_COMPONENT_RUNTIME_DESCRIPTION "nxrt runtime: libnxrt, the nxrt CLI, nxrt-conformance and the CPU execution provider")
set(CPACK_DEBIAN_DEV_PACKAGE_NAME nxrt-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "nxrt ${_v}, libfmt-dev")
set(CPACK_DEBIAN_DEV_PACKAGE_RECOMMENDS "cmake, pkg-config, g++")
set(CPACK_COMPONENT_DEV_DESCRIPTION "nxrt development files: C/C++ API, plugin ABI and SDK headers, CMake package, pkg-config")
if(TARGET nxrt_ep_vulkan)
  list(APPEND CPACK_COMPONENTS_ALL vulkan)
  set(CPACK_DEBIAN_VULKAN_PACKAGE_NAME nxrt-vulkan)
  set(CPACK_DEBIAN_VULKAN_PACKAGE_DEPENDS "nxrt ${_v}, libvulkan1, libfmt9, libstdc++6, libc6")
  set(CPACK_DEBIAN_VULKAN_PACKAGE_RECOMMENDS "mesa-vulkan-drivers")
  set(CPACK_COMPONENT_VULKAN_DESCRIPTION "nxrt Vulkan execution provider")
endif()
if(TARGET nxrt_ep_cuda)
  list(APPEND CPACK_COMPONENTS_ALL cuda)
  set(CPACK_DEBIAN_CUDA_PACKAGE_NAME nxrt-cuda)
  set(CPACK_DEBIAN_CUDA_PACKAGE_DEPENDS "nxrt ${_v}")
  set(CPACK_COMPONENT_CUDA_DESCRIPTION "nxrt CUDA execution provider")
endif()
if(TARGET nxrt_python)
  list(APPEND CPACK_COMPONENTS_ALL python)
  set(CPACK_DEBIAN_PYTHON_PACKAGE_NAME python3-nxrt)
  set(CPACK_DEBIAN_PYTHON_PACKAGE_DEPENDS "nxrt ${_v}, python3 (>= 3.11), python3 (<< 3.12), python3-numpy")
  set(CPACK_COMPONENT_PYTHON_DESCRIPTION "nxrt Python module (ONNX Runtime-shaped API)")
endif()
include(CPack)
