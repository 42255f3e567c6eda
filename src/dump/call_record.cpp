// Reading call.json and the tensors it refers to.
#include "mate/dump/call_record.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <regex>
#include <set>
#include <tuple>
#include <nlohmann/json.hpp>

#include "file_io.hpp"
#include "json_numbers.hpp"
#include "mate/log/arg_json.hpp"
#include "tensor_format.hpp"

namespace mate::dump {

namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

constexpr std::pair<CallStatus, const char*> kStatus[] = {
    {CallStatus::WritingInputs, "writing_inputs"}, {CallStatus::InputsSaved, "inputs_saved"},
    {CallStatus::Completed, "completed"},          {CallStatus::Raised, "raised"},
    {CallStatus::Failed, "failed"},
};

std::string str_or(const json& j, const char* key, std::string fallback = "") {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : fallback;
}

// A tensor names its file inside the call directory, or why it has none.
void check_files(const RecordedArg& a) {
  if (a.kind == RecordedArg::Kind::List) {
    for (const RecordedArg& item : a.items) check_files(item);
    return;
  }
  if (a.kind != RecordedArg::Kind::Tensor) return;
  if (a.file.empty() && a.error.empty()) throw DumpError("tensor argument " + a.name + " names no file");
  if (a.file.find("..") != std::string::npos || (!a.file.empty() && a.file[0] == '/'))
    throw DumpError("tensor argument " + a.name + " names a file outside the call directory: " + a.file);
}

// j[key] as a string, a FieldError naming the key otherwise (nlohmann's own message
// names neither the field nor the file); a missing key is json::out_of_range, as with at().
std::string string_at(const json& j, const char* key) {
  const json& v = j.at(key);
  if (!v.is_string()) throw detail::FieldError(std::string(key) + ": expected a string, found " + v.dump());
  return v.get<std::string>();
}

// One argument: the shared schema, plus what a dump must be able to trust.
RecordedArg parse_arg(const json& j) {
  RecordedArg a;
  try {
    a = log::arg_from_json(j);
  } catch (const log::ArgSchemaError& e) {
    throw detail::FieldError(e.what());
  }
  check_files(a);
  return a;
}

std::vector<RecordedArg> parse_args(const json& j, const char* key) {
  std::vector<RecordedArg> out;
  auto it = j.find(key);
  if (it == j.end()) return out;
  if (!it->is_array()) throw DumpError(std::string(key) + " is not a list");
  for (const json& a : *it) out.push_back(parse_arg(a));
  return out;
}

}  // namespace

const char* to_string(CallStatus s) noexcept {
  for (const auto& [status, name] : kStatus)
    if (status == s) return name;
  return "?";
}

CallRecord parse_call(std::string_view text, const std::string& dir) {
  const std::string what = (fs::path(dir) / kCallFile).string();
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) throw DumpError(what + ": not valid JSON (truncated or corrupt)");
  if (!j.is_object()) throw DumpError(what + ": not a JSON object");
  CallRecord r;
  r.dir = dir;
  try {
    if (str_or(j, "format") != "mate-dump") throw DumpError("format is not \"mate-dump\"");
    const int version = detail::integer_at<int>(j, "version");
    if (version != kCallFormatVersion) throw DumpError("unsupported version " + std::to_string(version) + " (this reader reads 1)");
    r.function = string_at(j, "function");
    r.seq = detail::integer_at<std::uint64_t>(j, "seq");
    r.pid = j.contains("pid") ? detail::integer_at<decltype(r.pid)>(j, "pid") : 0;
    r.tid = j.contains("tid") ? detail::integer_at<decltype(r.tid)>(j, "tid") : 0;
    r.mate_version = str_or(j, "mate_version");
    r.started = str_or(j, "started");
    r.finished = str_or(j, "finished");
    r.process_first_started = str_or(j, "process_first_started");
    const std::string status = string_at(j, "status");
    bool known = false;
    for (const auto& [s, name] : kStatus) {
      if (status == name) {
        r.status = s;
        known = true;
      }
    }
    if (!known) throw DumpError("unknown status \"" + status + "\"");
    r.tensor_format = string_at(j, "tensor_format");
    if (detail::tensor_format_named(r.tensor_format) == nullptr)
      throw DumpError("unknown tensor_format \"" + r.tensor_format + "\" (known: " + detail::tensor_format_names() + ")");
    if (auto e = j.find("exception"); e != j.end() && e->is_object()) {
      r.exception_type = str_or(*e, "type");
      r.exception_message = str_or(*e, "message");
    }
    r.error = str_or(j, "error");
    if (auto py = j.find("python"); py != j.end()) {
      if (!py->is_object()) throw DumpError("python: expected an object with \"function\" and \"script\"");
      r.python_function = string_at(*py, "function");
      r.python_script = str_or(*py, "script");
    }
    r.inputs = parse_args(j, "inputs");
    r.outputs = parse_args(j, "outputs");
  } catch (const detail::FieldError& e) {
    throw DumpError(what + ": invalid field: " + e.what());
  } catch (const DumpError& e) {
    throw DumpError(what + ": " + e.what());
  } catch (const json::exception& e) {
    throw DumpError(what + ": invalid field: " + e.what());
  }
  return r;
}

CallRecord read_call(const std::string& dir) {
  const std::string path = (fs::path(dir) / kCallFile).string();
  // A call directory that is a link leads out of the dump (find_call_dirs names a --dir that is
  // itself a link with a trailing '/', which resolves it).
  detail::check_not_a_link(dir, "a call directory");
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 && errno == ENOENT)
    throw DumpError(path + " is missing: the dump was interrupted before its metadata was written, or this is not a call directory");
  return parse_call(detail::read_file(path), dir);
}

TensorRecord load_tensor(const CallRecord& call, const RecordedArg& arg) {
  if (arg.kind != RecordedArg::Kind::Tensor) throw DumpError("argument " + arg.name + " is not a tensor");
  if (!arg.error.empty()) {
    // The writer records most reasons as "not saved: <why>": say it once.
    constexpr std::string_view kPrefix = "not saved: ";
    const std::string_view why = std::string_view(arg.error).starts_with(kPrefix) ? std::string_view(arg.error).substr(kPrefix.size())
                                                                                  : std::string_view(arg.error);
    throw DumpError("tensor " + arg.name + " was not saved: " + std::string(why));
  }
  const std::string path = (fs::path(call.dir) / arg.file).string();
  detail::check_directories_inside(call.dir, arg.file);  // inputs/ as a link leads out of the dump
  const detail::TensorFormat* format = detail::tensor_format_named(call.tensor_format);
  if (format == nullptr) throw DumpError("unknown tensor_format \"" + call.tensor_format + "\"");
  return format->read(path, arg);
}

bool keeps_layout(const CallRecord& call) {
  const detail::TensorFormat* format = detail::tensor_format_named(call.tensor_format);
  return format != nullptr && format->keeps_layout();
}

namespace {

// What places a call directory in call order.
struct CallOrder {
  std::string path, name;
  bool known = false;   // pid and seq known, from call.json or the directory name
  long pid = 0;
  std::uint64_t seq = 0;
  std::string started;  // the call's start as 20 digits (YYYYmmddHHMMSS + microseconds): sorts as text
  std::string process;  // process_first_started, the same way; "" when not recorded
};

// The digits of a timestamp, padded to microseconds: "2026-11-22T07:15:30.123456Z" and the
// directory name's "20261122_071530_123" compare correctly as text.
std::string timestamp_digits(std::string_view text) {
  std::string out;
  for (char c : text)
    if (c >= '0' && c <= '9') out.push_back(c);
  out.resize(20, '0');
  return out;
}

// <YYYYmmdd>_<HHMMSS>_<mmm>_pid<PID>_call<SEQ>_<function>
bool parse_name(const std::string& name, CallOrder& o) {
  static const std::regex pattern(R"(^(\d{8}_\d{6}_\d{3})_pid(\d{1,9})_call(\d{1,19})_)");
  std::smatch m;
  if (!std::regex_search(name, m, pattern)) return false;
  o.started = timestamp_digits(m.str(1));
  o.pid = std::stol(m.str(2));
  o.seq = std::stoull(m.str(3));
  return true;
}

CallOrder order_of(const std::string& path, const std::string& name) {
  CallOrder o;
  o.path = path;
  o.name = name;
  o.known = parse_name(name, o);
  try {
    const CallRecord c = read_call(path);  // authoritative where readable
    o.known = true;
    if (c.pid != 0) o.pid = c.pid;  // else the name's, when it has one
    if (c.seq != 0) o.seq = c.seq;  // sequence numbers start at 1
    if (!c.started.empty()) o.started = timestamp_digits(c.started);
    if (!c.process_first_started.empty()) o.process = timestamp_digits(c.process_first_started);
  } catch (const DumpError&) {
    // Ordered by its name; replay reports what is wrong with it.
  }
  return o;
}

}  // namespace

std::vector<std::string> find_call_dirs(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) throw DumpError(path + " is not a directory");
  struct stat st {};
  if (::lstat((fs::path(path) / kCallFile).c_str(), &st) == 0) {
    // The path named may be a link; read_call rejects links, so name it resolved.
    return {fs::is_symlink(path, ec) && !path.ends_with('/') ? path + "/" : path};
  }
  std::vector<CallOrder> calls;
  for (const auto& entry : fs::directory_iterator(path, ec)) {
    const std::string name = entry.path().filename().string();
    // A call directory that is a link is listed too: read_call rejects it, naming it.
    if ((entry.is_directory(ec) || entry.is_symlink(ec)) && name.find("_pid") != std::string::npos &&
        name.find("_call") != std::string::npos)
      calls.push_back(order_of(entry.path().string(), name));
  }
  if (ec) throw DumpError("cannot list " + path + ": " + ec.message());
  // A call that does not record its process (an older dump, an unreadable call.json) belongs to
  // the one process of its pid in this directory, if there is exactly one.
  std::map<long, std::set<std::string>> processes;
  for (const CallOrder& c : calls)
    if (c.known && !c.process.empty()) processes[c.pid].insert(c.process);
  for (CallOrder& c : calls) {
    auto it = processes.find(c.pid);
    if (c.known && c.process.empty() && it != processes.end() && it->second.size() == 1) c.process = *it->second.begin();
  }
  // Calls that still have no process (older dumps, unreadable call.json): a pid's calls, in time
  // order, are one process until a sequence number repeats, which only a later process reusing
  // the pid can do (within a process every call has its own). Such a process starts at its first
  // call.
  std::map<long, std::vector<CallOrder*>> unattributed;
  for (CallOrder& c : calls)
    if (c.known && c.process.empty()) unattributed[c.pid].push_back(&c);
  for (auto& [pid, list] : unattributed) {
    std::sort(list.begin(), list.end(), [](const CallOrder* a, const CallOrder* b) {
      return std::tie(a->started, a->name) < std::tie(b->started, b->name);
    });
    std::set<std::uint64_t> seqs;
    std::string start;
    for (CallOrder* c : list) {
      if (start.empty() || seqs.count(c->seq) != 0) {
        seqs.clear();
        start = c->started;
      }
      seqs.insert(c->seq);
      c->process = start;
    }
  }
  // A process starts at its first call: the recorded process_first_started, else the start of
  // its lowest-numbered call here.
  std::map<std::pair<long, std::string>, std::pair<std::uint64_t, std::string>> first;  // -> (seq, started)
  for (const CallOrder& c : calls) {
    if (!c.known) continue;
    auto [it, added] = first.try_emplace({c.pid, c.process}, c.seq, c.started);
    if (!added && c.seq < it->second.first) it->second = {c.seq, c.started};
  }
  auto process_start = [&](const CallOrder& c) {
    return c.process.empty() ? first.at({c.pid, c.process}).second : c.process;
  };
  // Processes by their first call's time, each process's calls by sequence number (the order
  // they were made, which timestamps taken on different threads need not follow); directories
  // that name no call last, by name.
  std::sort(calls.begin(), calls.end(), [&](const CallOrder& a, const CallOrder& b) {
    if (a.known != b.known) return a.known;
    if (!a.known) return a.name < b.name;
    return std::forward_as_tuple(process_start(a), a.pid, a.process, a.seq, a.name) <
           std::forward_as_tuple(process_start(b), b.pid, b.process, b.seq, b.name);
  });
  std::vector<std::string> dirs;
  dirs.reserve(calls.size());
  for (const CallOrder& c : calls) dirs.push_back(c.path);
  return dirs;
}

}  // namespace mate::dump
