# Checkpoint tests driven from Python: saves and loads across real ranks (mpirun), a save killed
# with SIGKILL, and the `zerotrain ckpt` tools (inspect, verify, HF and llm.c export read back).
add_executable(zt_checkpoint_driver ${CMAKE_CURRENT_SOURCE_DIR}/checkpoint/checkpoint_mpi_driver.cpp)
target_link_libraries(zt_checkpoint_driver PRIVATE zerotrain_lib)
target_compile_options(zt_checkpoint_driver PRIVATE ${ZT_WARNINGS})

# The CLI test saves its GPT checkpoint with 3 ranks when MPI is built, with 1 otherwise.
if(ZT_MPI)
  set(_zt_ckpt_launcher -- ${ZT_MPIRUN} ${ZT_MPIRUN_FLAGS})
  set(_zt_ckpt_lock RESOURCE_LOCK mpi)
endif()
add_test(NAME checkpoint.cli_tools_and_export
  COMMAND ${ZT_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/checkpoint/ckpt_cli_test.py
    --zerotrain $<TARGET_FILE:zerotrain> --driver $<TARGET_FILE:zt_checkpoint_driver>
    --config ${PROJECT_SOURCE_DIR}/configs/tiny_debug.json ${_zt_ckpt_launcher})
set_tests_properties(checkpoint.cli_tools_and_export PROPERTIES LABELS cpu TIMEOUT 300 ${_zt_ckpt_lock})
add_test(NAME checkpoint.llama_export_hf
  COMMAND ${ZT_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/checkpoint/llama_export_test.py
    --zerotrain $<TARGET_FILE:zerotrain> --driver $<TARGET_FILE:zt_checkpoint_driver>
    --config ${PROJECT_SOURCE_DIR}/configs/llama_tiny_debug.json ${_zt_ckpt_launcher})
set_tests_properties(checkpoint.llama_export_hf PROPERTIES LABELS cpu TIMEOUT 300 ${_zt_ckpt_lock})
# A checkpoint.dir outside the run directory: export and sample --ckpt still find the run's vocabulary.
add_test(NAME checkpoint.run_text_found_from_elsewhere
  COMMAND ${ZT_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/checkpoint/checkpoint_elsewhere_test.py $<TARGET_FILE:zerotrain>)
set_tests_properties(checkpoint.run_text_found_from_elsewhere PROPERTIES LABELS cpu TIMEOUT 300)
add_test(NAME checkpoint.killed_save_leaves_previous_loadable
  COMMAND ${ZT_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/checkpoint/killed_save_test.py
    --zerotrain $<TARGET_FILE:zerotrain> --driver $<TARGET_FILE:zt_checkpoint_driver>)
set_tests_properties(checkpoint.killed_save_leaves_previous_loadable PROPERTIES LABELS cpu TIMEOUT 300)
if(ZT_MPI)
  add_test(NAME checkpoint.reshard_across_ranks_and_stages
    COMMAND ${ZT_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/checkpoint/reshard_mpi_test.py
      --driver $<TARGET_FILE:zt_checkpoint_driver> -- ${ZT_MPIRUN} ${ZT_MPIRUN_FLAGS})
  set_tests_properties(checkpoint.reshard_across_ranks_and_stages PROPERTIES LABELS "cpu;mpi" TIMEOUT 600 RESOURCE_LOCK mpi)
endif()

# Resume through the real ZeroParamStore + ShardedAdamW on other rank counts and stages.
add_executable(zt_checkpoint_resume_driver ${CMAKE_CURRENT_SOURCE_DIR}/checkpoint/optimizer_resume_driver.cpp)
target_link_libraries(zt_checkpoint_resume_driver PRIVATE zerotrain_lib)
target_compile_options(zt_checkpoint_resume_driver PRIVATE ${ZT_WARNINGS})
if(ZT_MPI)
  add_test(NAME checkpoint.resume_resharded_through_the_optimizer
    COMMAND ${ZT_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/checkpoint/reshard_resume_test.py
      --driver $<TARGET_FILE:zt_checkpoint_resume_driver> --config ${PROJECT_SOURCE_DIR}/configs/tiny_debug.json
      -- ${ZT_MPIRUN} ${ZT_MPIRUN_FLAGS})
  set_tests_properties(checkpoint.resume_resharded_through_the_optimizer PROPERTIES LABELS "cpu;mpi" TIMEOUT 600 RESOURCE_LOCK mpi)
endif()
