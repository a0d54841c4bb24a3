# The sources of ppstage_core, relative to the project root: what needs no LibTorch (text
# and file helpers, topology, the schedule IR, lowering, simulator, CSV, plugins, the
# built-in schedules). src/ builds them into ppstage_core; tests/fuzz compiles them again
# with libFuzzer and the sanitizers.
set(PPSTAGE_CORE_SOURCES
  src/core/text.cpp
  src/core/affine_dim.cpp
  src/core/cpu_features.cpp
  src/core/file.cpp
  src/core/host_name.cpp
  src/core/cpu_layout.cpp
  src/core/mapped_file.cpp
  src/core/allocator.cpp
  src/core/statistics.cpp
  src/core/topology.cpp
  src/schedule/action.cpp
  src/schedule/lowering.cpp
  src/schedule/early_receives.cpp
  src/schedule/send_order.cpp
  src/schedule/forward_only.cpp
  src/schedule/action_costs.cpp
  src/schedule/simulator.cpp
  src/schedule/schedule_csv.cpp
  src/schedule/plugin_loader.cpp
  src/schedule/pipeline_schedule.cpp
  schedules/builtin_schedules.cpp
  schedules/gpipe.cpp
  schedules/one_f_one_b.cpp
  schedules/interleaved_1f1b.cpp
  schedules/zb_h1.cpp
  schedules/zb_v.cpp
)
