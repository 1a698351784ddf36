# Shared by the source tree (sdk/CMakeLists.txt) and the installed package (nxrtConfig.cmake):
# turns a MODULE library target into an nxrt EP plugin, libnxrt_ep_<ep_name>.so, that exports
# only nxrt_ep_negotiate (a linker version script), with hidden visibility for everything else.
function(nxrt_configure_ep_plugin target ep_name version_script)
  set_target_properties(${target} PROPERTIES PREFIX "lib" OUTPUT_NAME "nxrt_ep_${ep_name}" SUFFIX ".so"
                        CXX_VISIBILITY_PRESET hidden C_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
  target_link_options(${target} PRIVATE -Wl,--no-undefined -Wl,--version-script=${version_script})
  set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS ${version_script})
endfunction()
