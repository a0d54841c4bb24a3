# The fuzz targets (tests/fuzz/<name>_fuzzer.cpp) and, for each, the sources beyond
# ppstage_core it exercises, relative to the project root, and whether it needs LibTorch.
# tests/fuzz builds them with libFuzzer; tests/ replays the corpus through them in CTest.
set(PPSTAGE_FUZZ_TARGETS schedule_csv config manifest message_tag boundary_spec trace data_file)
set(PPSTAGE_FUZZ_schedule_csv_SOURCES)
set(PPSTAGE_FUZZ_config_SOURCES src/config/options.cpp src/config/validation.cpp)
set(PPSTAGE_FUZZ_manifest_SOURCES src/checkpoint/manifest.cpp)
set(PPSTAGE_FUZZ_message_tag_SOURCES src/comm/message_tag.cpp)
set(PPSTAGE_FUZZ_boundary_spec_SOURCES src/comm/boundary_spec.cpp src/comm/message_tag.cpp
    src/comm/communicator.cpp)
set(PPSTAGE_FUZZ_boundary_spec_TORCH ON)
set(PPSTAGE_FUZZ_trace_SOURCES src/observe/chrome_trace_reader.cpp src/observe/timelines.cpp
    src/observe/timeline_svg.cpp src/observe/trace.cpp)
set(PPSTAGE_FUZZ_data_file_SOURCES src/data/data_files.cpp src/data/dataset.cpp
    src/data/documents.cpp src/data/named_arrays.cpp src/data/npy_file.cpp
    src/data/idx_file.cpp src/data/gzip.cpp src/data/token_file.cpp src/data/tensor_file.cpp
    src/data/embedded_text.cpp src/core/dtype_name.cpp)
set(PPSTAGE_FUZZ_data_file_TORCH ON)
