// `ppstage schedule`: build, validate and simulate a pipeline schedule; print its timeline.
#include "commands.h"

#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <iostream>

#include "ppstage/config/options.h"
#include "ppstage/core/file.h"
#include "ppstage/observe/timelines.h"
#include "ppstage/schedule/pipeline_schedule.h"
#include "ppstage/schedule/schedule_csv.h"

namespace ppstage::cli {
namespace {

nlohmann::json costsJson(const ActionCosts& c) {
  return {{"F", c.forward},
          {"B", c.backward},
          {"I", c.input_grad},
          {"W", c.weight_grad},
          {"tp_forward", c.tp_forward},
          {"tp_backward", c.tp_backward}};
}

nlohmann::json scheduleJson(const PipelineSchedule& s, const ActionCosts& costs) {
  nlohmann::json actions = nlohmann::json::array();
  for (const ActionList& list : s.ranks) {
    nlohmann::json row = nlohmann::json::array();
    for (const Action& a : list) row.push_back(toString(a));
    actions.push_back(row);
  }
  const SimulationResult& r = s.simulation;
  return {{"valid", true},
          {"schedule", s.name},
          {"stages", s.request.num_stages},
          {"microbatches", s.request.num_microbatches},
          {"ranks", s.request.numRanks()},
          {"stages_per_rank", s.request.stages_per_rank},
          {"placement", toString(s.request.placement)},
          {"costs", costsJson(costs)},
          {"makespan", r.makespan},
          {"bubble_fraction", r.bubble_fraction},
          {"idle", r.idle},
          {"peak_inflight", r.peak_inflight},
          {"in_order_per_pair", r.in_order_per_pair},
          {"actions", actions}};
}

void printReport(const PipelineSchedule& s, const ActionCosts& costs) {
  const SimulationResult& r = s.simulation;
  std::printf(
      "schedule %s: %d stages on %d ranks (%s), %d micro-batches; costs F=%g B=%g "
      "I=%g W=%g\n\n",
      s.name.c_str(), s.request.num_stages, s.request.numRanks(), toString(s.request.placement),
      s.request.num_microbatches, costs.forward, costs.backward, costs.input_grad,
      costs.weight_grad);
  std::cout << renderTimeline(s.request, s.ranks, r, costs) << "\n";
  std::printf("makespan %g, bubble fraction %.4f (idle per rank:", r.makespan, r.bubble_fraction);
  for (double idle : r.idle) std::printf(" %g", idle);
  std::printf(")\npeak micro-batches in flight per stage:");
  for (int peak : r.peak_inflight) std::printf(" %d", peak);
  std::printf("\nmessages between each pair of ranks %s\n",
              r.in_order_per_pair ? "are received in sending order (safe for NCCL too)"
                                  : "are received out of sending order (MPI tags handle it; "
                                    "NCCL would not)");
}

// Builds the schedule; an invalid one prints its grid (as JSON with --json) and rethrows.
PipelineSchedule buildOrPrintGrid(const ScheduleRegistry& registry, const ScheduleOptions& o,
                                  bool json) {
  try {
    return buildSchedule(registry, o);
  } catch (const ScheduleError& e) {
    if (json) {
      std::cout << nlohmann::json{{"valid", false}, {"error", e.what()}, {"grid", e.grid()}}.dump(2)
                << std::endl;
    } else {
      std::cout << e.grid();
    }
    throw;
  }
}

// Writes the schedule as a CSV table and its simulated timeline as SVG, where a path is given.
void writeScheduleFiles(const PipelineSchedule& schedule, const ActionCosts& costs,
                        const std::string& csv_path, const std::string& svg_path) {
  if (!csv_path.empty()) {
    std::ofstream file(csv_path);
    PPSTAGE_CHECK(file.good(), "cannot write '", csv_path, "'");
    file << scheduleToCsv(schedule.ranks, "ppstage schedule " + schedule.name);
  }
  if (!svg_path.empty()) {
    writeFileAtomically(
        svg_path, renderTimelineSvg(plannedTimeline(schedule.name, schedule.request, schedule.ranks,
                                                    schedule.simulation, costs)));
  }
}

}  // namespace

int scheduleMain(int argc, const char* const* argv) {
  PipelineConfig pipeline;
  std::string costs_text = "1,2,1,1";
  std::string tp_costs_text = "0,0";
  std::string csv_path, svg_path;
  bool json = false;
  po::options_description options;
  addStageCountOption(options, pipeline);
  addScheduleOptions(options, pipeline);
  po::options_description output("Simulation and output");
  auto add = output.add_options();
  add("costs", po::value(&costs_text)->default_value(costs_text),
      "cost of one F, B, I and W of one stage and micro-batch, as F,B,I,W");
  add("tp_costs", po::value(&tp_costs_text)->default_value(tp_costs_text),
      "tensor parallelism: the cost of one stage's TP all-reduces in one F and in one B (I "
      "carries the backward's), as F,B; added to those actions (the metrics' tp_s over the "
      "micro-batches measures them)");
  add("csv", po::value(&csv_path), "also write the lowered schedule as a CSV table here");
  add("svg", po::value(&svg_path),
      "also draw the simulated timeline to this SVG file (as ppstage timeline draws a measured "
      "one)");
  add("json", po::bool_switch(&json),
      "print valid, bubble_fraction, makespan, peak_inflight (per stage) and actions (per "
      "rank) as JSON");
  options.add(output);
  const char* usage =
      "usage: ppstage schedule --pipeline.schedule NAME --pipeline.stages S\n"
      "           --pipeline.microbatches M [--pipeline.stages_per_rank V] [--costs F,B,I,W]\n"
      "           [--csv out.csv] [--svg out.svg] [--json]\n\n"
      "Builds the schedule's action list for every rank, adds the sends and receives,\n"
      "validates it (every F before its backward, every send received, no deadlock) and\n"
      "simulates it with the given costs: a timeline per rank, the bubble fraction and the\n"
      "peak number of micro-batches alive per stage. An invalid schedule exits non-zero\n"
      "with its actions printed and the problem marked [like this].";
  std::set<std::string> given;
  if (!parseOptions(argc, argv, options, usage, std::cout, &given)) return 0;
  const ScheduleRegistry registry = makeScheduleRegistry(pipeline.schedule_plugin);
  const std::string layout_note = defaultScheduleLayout(registry, pipeline, given);
  if (!layout_note.empty() && !json) std::cout << layout_note << "\n";
  validate(pipeline);

  ScheduleOptions o = scheduleOptionsFor(pipeline, static_cast<int>(pipeline.stages),
                                         static_cast<int>(pipeline.stages_per_rank));
  o.costs = ActionCosts::parse(costs_text);
  o.costs.parseTensorParallel(tp_costs_text);

  const PipelineSchedule schedule = buildOrPrintGrid(registry, o, json);
  writeScheduleFiles(schedule, o.costs, csv_path, svg_path);
  if (json) {
    std::cout << scheduleJson(schedule, o.costs).dump(2) << std::endl;
  } else {
    printReport(schedule, o.costs);
  }
  return 0;
}

}  // namespace ppstage::cli
