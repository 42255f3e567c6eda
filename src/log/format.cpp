// Rendering of records from their Arg lists in the two formats. Both carry the same fields;
// docs/logging.md lists them. In JSON each argument is the shared schema (mate/log/arg_json.hpp);
// the text form is text_format.cpp's. Statistics (level >= 5) are computed while the record is
// built.
#include <nlohmann/json.hpp>

#include "log_internal.hpp"
#include "mate/core/utc_time.hpp"
#include "mate/log/arg_json.hpp"
#include "mate/tensor/stats.hpp"

namespace mate::log::detail {

namespace {

using nlohmann::ordered_json;

std::string timestamp(const timespec& t) { return core::utc_iso8601_micros(t); }

const char* event_name(Event e) {
  switch (e) {
    case Event::Call: return "call";
    case Event::Inputs: return "inputs";
    case Event::Outputs: return "outputs";
    case Event::Exception: return "exception";
  }
  return "?";
}

// ---- JSON ----

// Level-5 statistics, the one thing the log adds to the argument schema (mate/log/arg_json.hpp).
void add_stats(const Arg& a, ordered_json& j) {
  tensor::StatsResult r = tensor::compute_stats(a.tensor->view());
  if (r.stats) {
    ordered_json s;
    s["count"] = r.stats->count;
    if (r.stats->finite > 0) {
      s["min"] = r.stats->min;
      s["max"] = r.stats->max;
      s["mean"] = r.stats->mean;
    }
    if (r.stats->floating) {
      s["nan"] = r.stats->nan;
      s["inf"] = r.stats->inf;
    }
    j["stats"] = std::move(s);
  } else {
    // "stats unavailable: no backend for cuda:0" -> "no backend for cuda:0"; "stats skipped: CUDA
    // graph capture in progress" -> "skipped: CUDA graph capture in progress".
    constexpr std::string_view kPrefix = "stats unavailable: ", kStats = "stats ";
    std::string_view why = r.unavailable;
    if (why.substr(0, kPrefix.size()) == kPrefix) why.remove_prefix(kPrefix.size());
    else if (why.substr(0, kStats.size()) == kStats) why.remove_prefix(kStats.size());
    j["stats_unavailable"] = why;
  }
}

std::string json_record(const Header& h, Event event, int level, const std::vector<Arg>& args,
                        const CallOutcome* outcome) {
  ordered_json j;
  j["ts"] = timestamp(h.time);
  j["pid"] = h.pid;
  j["tid"] = h.tid;
  j["seq"] = h.seq;
  j["fn"] = h.name;
  j["event"] = event_name(event);
  if (outcome != nullptr) j["elapsed_us"] = outcome->elapsed_us;
  if (event == Event::Exception) {
    j["exception"] = {{"type", outcome->exception_type}, {"message", outcome->exception_message}};
  }
  if (event != Event::Call) {
    ordered_json list = ordered_json::array();
    const TensorFieldsHook stats = level >= 5 ? TensorFieldsHook(add_stats) : TensorFieldsHook();
    for (const Arg& a : args) list.push_back(arg_to_json(a, stats));
    j["args"] = std::move(list);
  }
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace

void render(Format format, const Header& header, Event event, int level, const std::vector<Arg>& args,
            const CallOutcome* outcome, RecordBuffer& out) {
  if (format == Format::Json) {
    const std::string record = json_record(header, event, level, args, outcome);
    out.append(record);
  } else {
    text_header(header, event, outcome, out);
    if (event == Event::Call) return;
    TextRecord record{&out, level};
    for (const Arg& a : args) write_text_arg(record, a);
  }
}

}  // namespace mate::log::detail
