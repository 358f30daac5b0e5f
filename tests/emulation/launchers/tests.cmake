# The CUDA launchers under the SIMT emulator ([Note: launcher emulation] in
# launcher_emulation.h), in every build (nvcc or not): each kernels/cuda/<op>.cu is rewritten as
# C++ at build time (rewrite_launches.py: its launches become simt::launch_on calls), compiled with
# the stand-ins of stubs/ and simt/ before every other header, and run against the CPU kernels.
# norm_rows_choice.cpp holds no launch (the norm backwards' kernel choice) and compiles as it is.
set(_zt_launcher_dir ${CMAKE_CURRENT_SOURCE_DIR}/emulation/launchers)
file(GLOB _zt_emulated_sources CONFIGURE_DEPENDS ${_zt_launcher_dir}/*.cpp)
list(APPEND _zt_emulated_sources ${CMAKE_CURRENT_SOURCE_DIR}/emulation/simt_runtime.cpp
                         ${PROJECT_SOURCE_DIR}/kernels/cuda/norm_rows_choice.cpp)
foreach(_op adamw cast chunked_cross_entropy cross_entropy dropout flash_attention flash_attention_tc gelu int8_blocks
        layernorm norm residual rmsnorm rope swiglu)
  set(_out ${CMAKE_CURRENT_BINARY_DIR}/emulated_launchers/${_op}.cpp)
  add_custom_command(OUTPUT ${_out}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_CURRENT_BINARY_DIR}/emulated_launchers
    COMMAND ${ZT_PYTHON} ${_zt_launcher_dir}/rewrite_launches.py ${PROJECT_SOURCE_DIR}/kernels/cuda/${_op}.cu ${_out}
    DEPENDS ${PROJECT_SOURCE_DIR}/kernels/cuda/${_op}.cu ${_zt_launcher_dir}/rewrite_launches.py
    COMMENT "Rewriting kernels/cuda/${_op}.cu's launches for the SIMT emulator" VERBATIM)
  list(APPEND _zt_emulated_sources ${_out})
endforeach()
add_executable(zt_launcher_emulation_tests ${_zt_emulated_sources})
# One file a translation unit: each launcher's anonymous constants, and launcher_emulation.cpp's
# return to the real zt::cuda, stay in their own file.
set_target_properties(zt_launcher_emulation_tests PROPERTIES UNITY_BUILD OFF)
# Only the kernels' layer, as zt_emulation_tests: the renamed launchers never meet the CUDA objects.
target_link_libraries(zt_launcher_emulation_tests PRIVATE zt_kernels GTest::gtest GTest::gtest_main)
target_include_directories(zt_launcher_emulation_tests BEFORE PRIVATE ${_zt_launcher_dir}/stubs
                           ${CMAKE_CURRENT_SOURCE_DIR}/emulation/simt)
# -fsanitize=alignment: a 16-byte vector access at an address that is not 16-byte aligned, which a
# GPU faults on and the CPU would take, ends the test with the kernel's line (a launcher that took
# the wide path for a view one element off).
target_compile_options(zt_launcher_emulation_tests PRIVATE -include ${_zt_launcher_dir}/launcher_emulation.h
                                                           -fno-strict-aliasing -ffp-contract=off -O2
                                                           -fsanitize=alignment -fno-sanitize-recover=alignment)
target_link_options(zt_launcher_emulation_tests PRIVATE -fsanitize=alignment)
gtest_discover_tests(zt_launcher_emulation_tests DISCOVERY_TIMEOUT 60 TEST_PREFIX launchers.
                     PROPERTIES LABELS cpu TIMEOUT 300 ENVIRONMENT ${ZT_TEST_ENVIRONMENT})
