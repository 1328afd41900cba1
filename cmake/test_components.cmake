# Component labels of the ctest entries, next to their tier labels (unit, mpi, python, cluster,
# gpu): `ctest -L elastic` runs every test of re-forms and elastic jobs, `ctest -L launcher`
# every test of chorusrun, and so on. One table for the whole tree: a test takes the label of
# every pattern its name matches. Each test directory calls chorus_label_components() at its
# end, after its tests' own properties are set (labels are appended, never replaced).
set(CHORUS_TEST_COMPONENTS
  "collectives:^(unit|unit_large|mpi_(ucx_)?np[0-9]+|python_(ucx_)?np[0-9]+|c_api_np[0-9]+|python_init_comm)$"
  "config:^(mpi_bad_env_one_rank|python_print_config|python_bad_variable_one_rank_.*|launcher_flags_e2e)$"
  "fusion:^unit_huge_pages$"
  "self_test:_self_test$"
  "elastic:^(unit_elastic|elastic_.*|python_elastic_.*|cluster_cut_elastic|gpu_reform)$"
  "launcher:^(launcher_.*|cluster_(launch|rendezvous_.*|ssh_refused_.*|env_forwarding|remote_sigterm|cut_gloo|cut_mpi)|python_run_func|python_install|python_bad_variable_one_rank_gloo|python_stall_repeat_gloo)$"
  "faults:^(mpi_stall|mpi_peer_death|mpi_(ucx_)?no_progress_.*|launcher_(mpi_lost_host_e2e|no_progress_contract|failure_attribution_e2e)|cluster_cut_.*|python_stall_repeat.*|python_one_rank_error|python_elastic_(torch_faults|soak)|flight_recorder_e2e)$"
  "hierarchical:hierarchical"
  "autotune:autotune"
  "timeline:^timeline_"
  "flight_recorder:^(flight_recorder_e2e|timeline_tool)$"
  "metrics:^metrics_"
  "ucx:(^|_)ucx_|_gloo$|cut_gloo"
  "gpu:^(gpu_.*|nccl_fake|bench_gpu_host_smoke)$"
  "host_cost:^(registered_alloc_.*|bench_overhead_smoke|python_overhead_bench_smoke|bench_gpu_host_smoke)$"
  "bench:(^bench_|_bench_smoke$|_bench_)"
  "c_api:^(c_api_.*|libchorus_exports_only_c_abi)$"
  "layering:^layering")

function(chorus_label_components)
  get_directory_property(tests TESTS)
  foreach(test IN LISTS tests)
    foreach(entry IN LISTS CHORUS_TEST_COMPONENTS)
      string(FIND "${entry}" ":" colon)
      string(SUBSTRING "${entry}" 0 ${colon} label)
      math(EXPR from "${colon} + 1")
      string(SUBSTRING "${entry}" ${from} -1 pattern)
      if(test MATCHES "${pattern}")
        set_property(TEST ${test} APPEND PROPERTY LABELS ${label})
      endif()
    endforeach()
  endforeach()
endfunction()
