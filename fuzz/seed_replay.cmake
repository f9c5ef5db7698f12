# Included from tests/CMakeLists.txt: the fuzzer (range_store_fuzzer.cc, the
# contract model and the store it drives) as a plain replay binary of the
# main build, with its operation trace on (HILO_FUZZ_TRACE); the test that
# every seed in fuzz/corpus/ still replays the operations of its trace in
# fuzz/seed_traces/; and the same on the run's PostgreSQL with a bounded
# number of pseudo-random inputs. It needs only FuzzedDataProvider.h, which
# clang (scripts/install-deps.sh) installs; libFuzzer and the clang build
# stay with fuzz/CMakeLists.txt.
file(GLOB _hilo_clang_includes /usr/lib/llvm-*/lib/clang/*/include)
find_path(HILO_FUZZED_DATA_PROVIDER_DIR fuzzer/FuzzedDataProvider.h
  PATHS ${_hilo_clang_includes})
if(HILO_FUZZED_DATA_PROVIDER_DIR)
  add_executable(fuzz_seed_replay
    "${PROJECT_SOURCE_DIR}/fuzz/range_store_fuzzer.cc"
    "${PROJECT_SOURCE_DIR}/fuzz/contract_model.cc"
    "${PROJECT_SOURCE_DIR}/fuzz/store_under_test.cc"
    "${PROJECT_SOURCE_DIR}/fuzz/seed_replay_main.cc")
  # The header alone: clang's include directory also holds its own
  # stddef.h and the like, which g++ must not pick up.
  set(_hilo_fdp_dir "${CMAKE_CURRENT_BINARY_DIR}/fuzzed_data_provider")
  configure_file(
    "${HILO_FUZZED_DATA_PROVIDER_DIR}/fuzzer/FuzzedDataProvider.h"
    "${_hilo_fdp_dir}/fuzzer/FuzzedDataProvider.h" COPYONLY)
  target_include_directories(fuzz_seed_replay PRIVATE "${_hilo_fdp_dir}")
  target_compile_definitions(fuzz_seed_replay PRIVATE HILO_FUZZ_TRACE)
  target_link_libraries(fuzz_seed_replay PRIVATE hilo::store_sqlite
                        hilo::store_postgres SQLite::SQLite3)
  add_test(NAME unit.fuzz_seed_traces
    COMMAND "${PROJECT_SOURCE_DIR}/fuzz/check_seed_traces.sh"
      "$<TARGET_FILE:fuzz_seed_replay>" "${PROJECT_SOURCE_DIR}/fuzz/corpus"
      "${PROJECT_SOURCE_DIR}/fuzz/seed_traces")
else()
  add_test(NAME unit.fuzz_seed_traces
    COMMAND /bin/sh -c "echo 'unit.fuzz_seed_traces: SKIPPED: no fuzzer/FuzzedDataProvider.h (clang, scripts/install-deps.sh)'; exit 77")
  set_tests_properties(unit.fuzz_seed_traces PROPERTIES SKIP_RETURN_CODE 77)
endif()
set_tests_properties(unit.fuzz_seed_traces PROPERTIES LABELS unit)

# The same fuzzer on PostgreSQL (the run's cluster, tests/CMakeLists.txt):
# the seeds replay their traces there too, then 40 pseudo-random inputs from
# a fixed seed on two stores at once, which must set operations aside at
# least once (fuzz/README.md; 10 to 20 s).
if(HILO_FUZZED_DATA_PROVIDER_DIR)
  add_test(NAME e2e.postgresql_fuzz
    COMMAND "${PROJECT_SOURCE_DIR}/fuzz/run_postgres_fuzz.sh"
      "$<TARGET_FILE:fuzz_seed_replay>" "${HILO_TEST_POSTGRES_DIR}" 40)
  set_tests_properties(e2e.postgresql_fuzz PROPERTIES
    LABELS e2e.postgresql FIXTURES_REQUIRED postgresql TIMEOUT 120)
endif()
