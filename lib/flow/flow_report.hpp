// The flow's report, for people: the per-trial quality table with the gate's decisions, the
// certification's trials and steady-state slope, the tuning studies, per-stage time as OptiKit's
// Figure 5 and the flow's own overhead. Markdown, and HTML with its style and its charts inline
// (bench's latency vs rate, steady state, CDFs and timeline; each study's trajectory and Pareto
// front) and no external reference, so it opens from a mail attachment or an air-gapped box.
#pragma once

#include "flow/flow_job.hpp"
#include "flow/flow_run.hpp"

#include <string>
#include <vector>

namespace optkit::flow {

std::string report_markdown(const FlowJob& job, const FlowOutcome& outcome, const std::vector<std::string>& launch);
std::string report_html(const FlowJob& job, const FlowOutcome& outcome, const std::vector<std::string>& launch);

} // namespace optkit::flow
