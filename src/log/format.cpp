// Rendering of records in the two formats. Both carry the same fields; docs/logging.md lists
// them. In JSON each argument is the shared schema (mate/log/arg_json.hpp); the text form is this
// file's own. Statistics (level >= 5) are computed here, while the record is built.
#include <fmt/compile.h>
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <charconv>

#include "log_internal.hpp"
#include "mate/core/utc_time.hpp"
#include "mate/log/arg_json.hpp"
#include "mate/tensor/stats.hpp"

namespace mate::log::detail {

namespace {

using nlohmann::ordered_json;

std::string timestamp(const timespec& t) { return core::utc_iso8601_micros(t); }

std::string_view timestamp(const timespec& t, char (&buf)[core::kUtcMicrosMax]) {
  return {buf, core::write_utc_iso8601_micros(t, buf)};
}

const char* event_name(Event e) {
  switch (e) {
    case Event::Call: return "call";
    case Event::Inputs: return "inputs";
    case Event::Outputs: return "outputs";
    case Event::Exception: return "exception";
  }
  return "?";
}

// ---- text ----
//
// Rendering is most of a call's cost after the write(2) itself, so a record is built with
// fmt::format_to and compiled format strings (no temporary strings per field, no format parsing
// at run time) in the caller's buffer, with room for most records inline, which the sink writes
// as it is.
using Out = std::back_insert_iterator<Buffer>;

void put(Buffer& out, std::string_view s) { out.append(s.data(), s.data() + s.size()); }
void put(Buffer& out, char c) { out.push_back(c); }

// A string from the program as the text format shows it: control characters, backslashes and
// (inside quotes) double quotes escaped as in JSON, so that no value can start a line that looks
// like a record of its own. Other bytes, UTF-8 included, are kept.
bool needs_escape(char c, bool quoted) {
  return static_cast<unsigned char>(c) < 0x20 || c == 0x7f || c == '\\' || (quoted && c == '"');
}

void append_escaped(Buffer& out, std::string_view s, bool quoted) {
  if (quoted) put(out, '"');
  // Most names and values need no escape: the part before the first that does goes in at once.
  std::size_t plain = 0;
  while (plain < s.size() && !needs_escape(s[plain], quoted)) ++plain;
  put(out, s.substr(0, plain));
  s.remove_prefix(plain);
  for (char c : s) {
    switch (c) {
      case '"': put(out, quoted ? "\\\"" : "\""); break;
      case '\\': put(out, "\\\\"); break;
      case '\n': put(out, "\\n"); break;
      case '\r': put(out, "\\r"); break;
      case '\t': put(out, "\\t"); break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
          fmt::format_to(Out(out), FMT_COMPILE("\\u{:04x}"), static_cast<unsigned char>(c));
        else
          put(out, c);
    }
  }
  if (quoted) put(out, '"');
}

// "a, b, c" for dims(0) .. dims(n - 1), without building a vector of them.
template <class Dim>
void append_dims(Buffer& out, int n, Dim dims) {
  for (int i = 0; i < n; ++i) {
    if (i > 0) put(out, ", ");
    fmt::format_to(Out(out), FMT_COMPILE("{}"), dims(i));
  }
}

// An integer in decimal (fmt's fastest path, no format string).
template <class Int>
void append_int(Buffer& out, Int v) {
  const fmt::format_int text(v);
  out.append(text.data(), text.data() + text.size());
}

// `v` as printf's "%.1f" writes it (a call's wall time in microseconds), by std::to_chars.
void append_fixed1(Buffer& out, double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed, 1);
  if (r.ec == std::errc()) out.append(buf, r.ptr);
  else fmt::format_to(Out(out), FMT_COMPILE("{:.1f}"), v);  // beyond 64 characters: ~1e62 us
}

// `v` as printf's "%.6g" writes it. std::to_chars (Ryu) is several times faster than fmt's
// precision formatting, which takes its exact (Dragon4) path for most such values.
void append_general6(Buffer& out, double v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general, 6);
  out.append(buf, r.ptr);
}

void text_stats(Buffer& out, const tensor::TensorView& v, std::string_view indent) {
  tensor::StatsResult r = tensor::compute_stats(v);
  if (!r.stats) {
    fmt::format_to(Out(out), FMT_COMPILE("{}  {}\n"), indent, r.unavailable);
    return;
  }
  const tensor::Stats& s = *r.stats;
  fmt::format_to(Out(out), FMT_COMPILE("{}  stats:"), indent);
  if (s.finite > 0) {
    put(out, " min ");
    append_general6(out, s.min);
    put(out, " max ");
    append_general6(out, s.max);
    put(out, " mean ");
    append_general6(out, s.mean);
  } else {
    put(out, " no finite values");
  }
  if (s.floating) fmt::format_to(Out(out), FMT_COMPILE(" nan {} inf {}"), s.nan, s.inf);
  put(out, "\n");
}

void text_arg(Buffer& out, const Arg& a, std::string_view indent, int level) {
  put(out, indent);
  append_escaped(out, a.name, false);
  put(out, ": ");
  switch (a.kind) {
    case Arg::Kind::None:
      fmt::format_to(Out(out), FMT_COMPILE("None ({})\n"), a.type);
      return;
    case Arg::Kind::Bool:
      fmt::format_to(Out(out), FMT_COMPILE("bool {}\n"), a.bool_value);
      return;
    case Arg::Kind::Int:
      fmt::format_to(Out(out), FMT_COMPILE("{} {}\n"), a.type, a.int_value);
      return;
    case Arg::Kind::UInt:
      fmt::format_to(Out(out), FMT_COMPILE("{} {}\n"), a.type, a.uint_value);
      return;
    case Arg::Kind::Float:
      if (a.type == "f32")
        fmt::format_to(Out(out), FMT_COMPILE("f32 {}\n"), static_cast<float>(a.float_value));
      else
        fmt::format_to(Out(out), FMT_COMPILE("f64 {}\n"), a.float_value);
      return;
    case Arg::Kind::String:
      put(out, "str ");
      append_escaped(out, a.text, true);
      put(out, "\n");
      return;
    case Arg::Kind::Enum:
      put(out, "enum ");
      if (a.text.empty()) {
        fmt::format_to(Out(out), FMT_COMPILE("{}\n"), a.int_value);
      } else {
        append_escaped(out, a.text, false);
        fmt::format_to(Out(out), FMT_COMPILE(" ({})\n"), a.int_value);
      }
      return;
    case Arg::Kind::List: {
      fmt::format_to(Out(out), FMT_COMPILE("list of {}\n"), a.items.size());
      const std::string deeper = std::string(indent) + "  ";
      for (const Arg& item : a.items) text_arg(out, item, deeper, level);
      return;
    }
    case Arg::Kind::Tensor: {
      tensor::TensorView v = a.tensor->view();
      tensor::VaRange va = v.va_range();
      fmt::format_to(Out(out), FMT_COMPILE("tensor {} ["), tensor::dtype_name(v.dtype()));
      append_dims(out, v.ndim(), [&](int i) { return v.shape(i); });
      put(out, "] strides [");
      append_dims(out, v.ndim(), [&](int i) { return v.stride(i); });
      put(out, ']');
      if (v.byte_offset() != 0) fmt::format_to(Out(out), FMT_COMPILE(" byte_offset {}"), v.byte_offset());
      // Addresses as the JSON form writes them ("0x..."; "0x0" for zero).
      fmt::format_to(Out(out), FMT_COMPILE(" {} {} va [{:#x}, {:#x}) {} bytes\n"), tensor::device_name(v.device()),
                     v.is_contiguous() ? "contiguous" : "non-contiguous", va.lo, va.hi, va.size());
      if (level >= 5) text_stats(out, v, indent);
      return;
    }
  }
}

void text_record(const Header& h, Event event, int level, const std::vector<Arg>& args, const CallOutcome* outcome,
                 Buffer& out) {
  // "[<timestamp> pid <pid> tid <tid> #<seq>] <name>", piece by piece (the header of every record).
  char ts[core::kUtcMicrosMax];
  put(out, '[');
  put(out, timestamp(h.time, ts));
  put(out, " pid ");
  append_int(out, h.pid);
  put(out, " tid ");
  append_int(out, h.tid);
  put(out, " #");
  append_int(out, h.seq);
  put(out, "] ");
  put(out, std::string_view(h.name));
  switch (event) {
    case Event::Call: put(out, '\n'); return;
    case Event::Inputs: put(out, " inputs\n"); break;
    case Event::Outputs:
      put(out, " outputs (");
      append_fixed1(out, outcome->elapsed_us);
      put(out, " us)\n");
      break;
    case Event::Exception:
      put(out, " exception (");
      append_fixed1(out, outcome->elapsed_us);
      put(out, " us): ");
      if (outcome->exception_type.empty() && outcome->exception_message.empty()) {
        put(out, "unknown (an exception left the call; its message is recorded only by MATE_API(...).run)\n");
      } else {
        if (!outcome->exception_type.empty()) {
          append_escaped(out, outcome->exception_type, false);
          put(out, ": ");
        }
        append_escaped(out, outcome->exception_message, false);
        put(out, "\n");
      }
      break;
  }
  for (const Arg& a : args) text_arg(out, a, "  ", level);
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
    // "stats unavailable: no backend for cuda" -> "no backend for cuda"; "stats skipped: CUDA
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
            const CallOutcome* outcome, Buffer& out) {
  if (format == Format::Json) {
    const std::string record = json_record(header, event, level, args, outcome);
    out.append(record.data(), record.data() + record.size());
  } else {
    text_record(header, event, level, args, outcome, out);
  }
}

}  // namespace mate::log::detail
