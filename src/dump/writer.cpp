// The level-10 writer: a log call hook that dumps each selected call (see mate/dump/dump.hpp).
//
// Invariants:
//  * Size cap: `used + reserved` never exceeds the cap. A call reserves, before it writes
//    anything, its input files' size twice (inputs, and the same again as the bound for its
//    outputs) plus its call.json as measured (twice: a replacement holds the old file and the
//    new one side by side) and kMetadataSlack; when it ends, the reservation is replaced by
//    what it actually wrote. call.json can be large (long lists and strings, an exception
//    message), so it is measured again before the outputs are written and before every
//    replacement: what does not fit is recorded as not saved, and a call.json that still would
//    not fit is not written (the dump fails) rather than cross the cap.
//  * call.json is only ever replaced whole (write_file_atomically), and only names tensor files
//    that are complete: each tensor file is written to a temporary, fsynced and renamed into
//    place (detail::NewFile), its directory is fsynced, and only then does a call.json naming it
//    replace the previous one. Until then the argument carries `error` (kPending), not `file`.
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include "mate/config.hpp"
#include "mate/core/atomic_file.hpp"
#include "mate/core/pattern_list.hpp"
#include "mate/core/quiet_write.hpp"
#include "mate/dump/call_record.hpp"
#include "mate/dump/dump.hpp"
#include "mate/log/api.hpp"
#include "file_io.hpp"
#include "mate/core/utc_time.hpp"
#include "mate/log/arg_json.hpp"
#include "tensor_format.hpp"

// Referenced by a linker option of mate::dump (--undefined) so that static linking keeps this
// file, whose static initializer installs the hook.
extern "C" {
[[gnu::used]] int mate_dump_hook_anchor = 0;
}

namespace mate::dump {

namespace detail {
// Weak: calls to it, this file's own included, stay calls through the symbol table whatever the
// compiler's flags (-fno-semantic-interposition binds a call to a function of the same file
// directly, and did here: a second writer). See its definition.
[[gnu::weak]] log::CallHook* level10_hook();
}

namespace {

using json = nlohmann::ordered_json;  // call.json keeps the order fields are written in
namespace fs = std::filesystem;

// Room a call keeps beyond its measured call.json for what the file gains before it is measured
// again: status, timestamps, elapsed time, the errors of tensors that could not be read.
constexpr std::uint64_t kMetadataSlack = 16 * 1024;
// An exception message that does not fit under the cap whole is cut to this many bytes.
constexpr std::size_t kCutMessageBytes = 4096;
constexpr const char* kNotSaved = "not saved: MATE_DUMP_MAX_SIZE_GB would be exceeded";
// What a tensor argument says until its file is complete: a call.json left with status
// writing_inputs (the process died while writing the inputs) shows it.
constexpr const char* kPending = "not saved: the dump stopped while the tensors were being written";

struct Settings {
  bool enabled = false;
  std::string root;
  std::uint64_t max_bytes = 0;
  std::int64_t max_count = 0;
  double max_gb = 0;
  bool safetensors = false;
  core::PatternList include, exclude;
};

struct ActiveDump {
  std::string dir;
  const detail::TensorFormat* format = nullptr;
  json meta;
  std::uint64_t reserved = 0;
  std::uint64_t written = 0;     // tensor bytes on disk
  std::uint64_t pending = 0;     // tensor bytes of the phase being written
  std::uint64_t meta_bytes = 0;  // call.json's size on disk
};

struct State {
  std::mutex mutex;
  bool loaded = false;
  bool banner_shown = false;
  bool root_ready = false;
  bool root_created = false;  // by this process (mode 0700), else it existed
  unsigned root_mode = 0;     // the root's permission bits when it was found
  Settings settings;
  Totals totals;
  std::uint64_t reserved = 0;  // bytes reserved by calls in progress
  bool warned_count = false, warned_size = false, warned_io = false;
  std::map<std::uint64_t, ActiveDump> active;  // by call sequence number
  // `started` of the process's first dumped call, in every call.json: with the pid it tells
  // processes apart (pids are reused) and orders them for replay. Kept by reconfigure(); a
  // forked child (another pid) starts its own.
  std::string first_started;
  pid_t first_pid = 0;
};

State& state() {
  static State* s = new State();  // never destroyed: calls may run during static destruction
  return *s;
}

// Never SIGPIPE: stderr may be a pipe whose reader has gone (core/quiet_write.hpp).
void warn(const std::string& message) { core::write_stderr("mate: " + message + "\n"); }

void load_locked(State& s) {
  Settings next;
  try {
    next.root = config::dump_dir();
    next.max_gb = config::dump_max_size_gb();
    next.max_bytes = static_cast<std::uint64_t>(std::min(next.max_gb * 1e9, 1.8e19));
    next.max_count = config::dump_max_count();
    next.safetensors = config::dump_safetensors();
    next.include = core::PatternList(config::dump_include());
    next.exclude = core::PatternList(config::dump_exclude());
    next.enabled = true;
  } catch (const std::exception& e) {
    warn(std::string("level-10 dumps disabled: ") + e.what());
  }
  s.settings = std::move(next);
  s.loaded = true;
}

// Creates the root (0700, and any missing parent 0700, whatever the umask) once. Returns false,
// with one warning, when it cannot. An existing root is used as it is (its mode is noted for the
// banner).
bool ensure_root_locked(State& s) {
  if (s.root_ready) return true;
  const fs::path root(s.settings.root);
  struct stat st {};
  bool created = false;
  if (::stat(root.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    if (root.has_parent_path()) core::create_directories(root.parent_path().string(), 0700);  // mkdir reports
    if (::mkdir(root.c_str(), 0700) == 0) {
      created = true;
    } else if (errno != EEXIST) {
      warn("level-10 dumps disabled: cannot create MATE_DUMP_DIR=" + s.settings.root + ": " + std::strerror(errno));
      s.settings.enabled = false;
      return false;
    }
    if (::stat(root.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      warn("level-10 dumps disabled: MATE_DUMP_DIR=" + s.settings.root + " is not a directory");
      s.settings.enabled = false;
      return false;
    }
  }
  s.root_created = created;
  s.root_mode = st.st_mode & 07777;
  s.root_ready = true;
  return true;
}

std::string octal_mode(unsigned mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", mode & 07777);
  return buf;
}

// Says once where the dumps go; only once the root is usable, so that it never announces dumps
// that an unusable MATE_DUMP_DIR then disables.
void show_banner_locked(State& s) {
  if (s.banner_shown) return;
  s.banner_shown = true;
  std::error_code ec;
  fs::path abs = fs::absolute(s.settings.root, ec);
  const std::string where = ec ? s.settings.root : abs.string();
  // What MATE did, not what it would have done: an existing root keeps its mode.
  warn("MATE_LOGLEVEL=10: dumping the inputs and outputs of API calls to " + where +
       (s.root_created ? " (dumps can hold sensitive data; the directory is created with mode 0700)"
                       : " (dumps can hold sensitive data; the existing directory has mode " + octal_mode(s.root_mode) +
                             "; each call directory is created with mode 0700, each file 0600)"));
  if (!s.root_created && (s.root_mode & (S_IWGRP | S_IWOTH)) != 0)
    warn("MATE_DUMP_DIR=" + where + " is writable by " + ((s.root_mode & S_IWOTH) != 0 ? "every user" : "its group") +
         " (mode " + octal_mode(s.root_mode) +
         "): others can add, rename or remove call directories there; MATE uses it as it is (make it private with "
         "chmod 700, or point MATE_DUMP_DIR at a new directory, which MATE creates with mode 0700)");
}

// Letters, digits, '.', '-' and '_' are kept; anything else becomes '_'.
std::string sanitize(std::string_view name) {
  std::string out;
  for (char c : name) out.push_back(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_' ? c : '_');
  if (out.empty()) out = "_";
  return out.substr(0, 100);
}

// The tensors of one call phase, and where each one's entry is in call.json.
struct Phase {
  std::vector<detail::PhaseTensor> tensors;
  std::vector<json::json_pointer> slots;  // one per tensor
};

// The call.json entries of a phase's arguments (the argument schema, mate/log/arg_json.hpp);
// each tensor says kPending until its file is complete, and joins `phase` (one whose layout is
// invalid says so, and does not).
json describe_all(const std::vector<log::Arg>& args, const std::string& name, const detail::TensorFormat& format,
                  Phase& phase) {
  json out = json::array();
  for (std::size_t k = 0; k < args.size(); ++k) {
    char index[32];
    std::snprintf(index, sizeof index, "%02zu_", k);
    // List items' stems and slots follow the items' positions.
    std::function<void(const log::Arg&, const std::string&, const json::json_pointer&)> walk =
        [&](const log::Arg& a, const std::string& stem, const json::json_pointer& slot) {
          if (a.kind == log::Arg::Kind::Tensor && a.tensor->view().layout().error == nullptr) {
            phase.tensors.push_back(detail::PhaseTensor{stem, *a.tensor, "", "", ""});
            phase.slots.push_back(slot);
          }
          for (std::size_t i = 0; i < a.items.size(); ++i) walk(a.items[i], stem + "." + std::to_string(i), slot / "items" / i);
        };
    walk(args[k], index + sanitize(args[k].name), json::json_pointer("/" + name) / k);
    // A tensor with an invalid layout describes no memory: there is nothing to save.
    out.push_back(log::arg_to_json(args[k], [](const log::Arg& a, json& j) {
      const char* invalid = a.tensor->view().layout().error;
      j["error"] = invalid ? std::string("not saved: invalid layout (") + invalid + ")" : std::string(kPending);
    }));
  }
  format.place(name, phase.tensors);
  return out;
}

// The argument at `slot` names its complete file.
void name_file(json& meta, const json::json_pointer& slot, const detail::PhaseTensor& t) {
  json& arg = meta[slot];
  arg.erase("error");
  arg["file"] = t.file;
  if (!t.key.empty()) arg["key"] = t.key;
}

// Every argument still pending in `args` (and in their list items) was not saved because of the
// I/O error `error` (a tensor whose memory could not be read keeps saying so).
void settle_pending(json& args, const std::string& error) {
  if (!args.is_array()) return;
  for (json& a : args) {
    if (a.value("error", "") == kPending) a["error"] = "not saved: " + error;
    if (a.contains("items")) settle_pending(a["items"], error);
  }
}

// Writes the tensors of one phase, each complete under its name before `meta` names it, and
// fsyncs the call directory so the names survive a power loss before a call.json that refers to
// them does (the format fsyncs its own subdirectories). Memory that cannot be read is recorded
// on the argument and is not an error of the dump; a file-system error is (returned; the
// arguments stay pending, and fail() records the error on them: files already renamed are
// complete but not named).
std::string write_tensors(const std::string& dir, const detail::TensorFormat& format, Phase& phase, json& meta,
                          std::uint64_t& written) {
  if (phase.tensors.empty()) return "";
  if (std::string error = format.write(dir, phase.tensors, written); !error.empty()) return error;
  if (std::string error = detail::sync_directory(dir); !error.empty()) return error;
  for (std::size_t k = 0; k < phase.tensors.size(); ++k) {
    if (!phase.tensors[k].read_error.empty()) meta[phase.slots[k]]["error"] = phase.tensors[k].read_error;
    else name_file(meta, phase.slots[k], phase.tensors[k]);
  }
  return "";
}

// Strings from the user's arguments need not be UTF-8: replace invalid bytes (U+FFFD) rather than
// let json::dump throw into the API call being dumped.
std::string metadata_text(const json& meta) { return meta.dump(2, ' ', false, json::error_handler_t::replace) + "\n"; }

std::string fmt_gb(double gb) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", gb);
  return buf;
}

// Makes d's reservation at least `want` bytes when the cap allows. When it does not: false, and
// the one size-cap warning (if `what`, saying what is lost, is given and none was shown yet).
bool reserve_up_to(ActiveDump& d, std::uint64_t want, const std::string& what) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (want <= d.reserved) return true;
  if (s.totals.bytes + s.reserved + (want - d.reserved) > s.settings.max_bytes) {
    if (!what.empty() && !s.warned_size) {
      s.warned_size = true;
      warn("dump size cap reached: MATE_DUMP_MAX_SIZE_GB=" + fmt_gb(s.settings.max_gb) + " (" +
           std::to_string(s.settings.max_bytes) + " bytes); " + what + " (raise MATE_DUMP_MAX_SIZE_GB to dump more)");
    }
    return false;
  }
  s.reserved += want - d.reserved;
  d.reserved = want;
  return true;
}

// The reservation d needs to replace call.json by `meta` later: its tensors, the pending ones,
// the file on disk and the new one (side by side while it is replaced), and the slack.
std::uint64_t room_for(const ActiveDump& d, const json& meta, std::uint64_t more_tensors) {
  return d.written + d.pending + more_tensors + d.meta_bytes + metadata_text(meta).size() + kMetadataSlack;
}

// Replaces call.json by d.meta. The size is checked here, last: when the new file would not fit
// in the reservation and the cap allows no more, nothing is written and `error` says why.
bool publish(ActiveDump& d, std::string* error) {
  const std::string text = metadata_text(d.meta);
  if (!reserve_up_to(d, d.written + d.pending + d.meta_bytes + text.size(), "")) {
    if (error) *error = "the " + std::to_string(text.size()) + "-byte " + kCallFile + " of " + d.dir + " would cross MATE_DUMP_MAX_SIZE_GB";
    return false;
  }
  std::string step;
  std::error_code ec = core::write_file_atomically(d.dir + "/" + kCallFile, text, 0600, &step);
  if (ec && error) *error = "cannot write " + d.dir + "/" + kCallFile + " (" + step + "): " + ec.message();
  if (!ec) d.meta_bytes = text.size();
  return !ec;
}

// Outputs recorded by value (strings, lists, numbers) whose value does not fit under the cap:
// kind "none" (no value to compare), the original type, and why.
void drop_output_values(json& outputs) {
  for (json& o : outputs) {
    if (o.value("kind", "") == "none" || o.contains("file") || o.contains("error")) continue;
    o["kind"] = "none";
    o.erase("value");
    o.erase("label");
    o.erase("items");
    o["error"] = kNotSaved;
  }
}

// Cuts a long exception message at a UTF-8 character boundary, saying how much was left out.
void cut_message(json& exception) {
  std::string m = exception.value("message", "");
  if (m.size() <= kCutMessageBytes) return;
  std::size_t cut = kCutMessageBytes;
  while (cut > 0 && (static_cast<unsigned char>(m[cut]) & 0xC0) == 0x80) --cut;
  exception["message"] = m.substr(0, cut) + "... (" + std::to_string(m.size() - cut) + " more bytes " + kNotSaved + ")";
}

class Writer final : public log::CallHook {
 public:
  int lowest_level() const noexcept override { return 10; }

  void before(const log::CallInfo& call, const std::vector<log::Arg>& inputs) override {
    if (call.level < 10) return;
    State& s = state();
    ActiveDump d;
    Phase phase;
    std::uint64_t in = 0;  // bytes of the input tensor files
    {
      std::lock_guard lock(s.mutex);
      if (!s.loaded) load_locked(s);
      if (!s.settings.enabled) return;
      if (!core::selected(call.name, s.settings.include, s.settings.exclude)) return;
      if (s.totals.calls >= static_cast<std::uint64_t>(s.settings.max_count)) {
        ++s.totals.skipped_count;
        if (!s.warned_count) {
          s.warned_count = true;
          warn("dump count cap reached: MATE_DUMP_MAX_COUNT=" + std::to_string(s.settings.max_count) +
               " calls dumped; further calls are not dumped (raise MATE_DUMP_MAX_COUNT to dump more)");
        }
        return;
      }
      d.format = s.settings.safetensors ? &detail::safetensors_format() : &detail::torch_save_format();
      d.meta = {{"format", "mate-dump"}, {"version", kCallFormatVersion}, {"function", call.name}, {"seq", call.seq},
                {"pid", static_cast<long>(::getpid())}, {"tid", static_cast<long>(::gettid())},
                {"mate_version", MATE_VERSION_STRING}, {"started", core::utc_now_iso8601_micros()},
                {"status", to_string(CallStatus::WritingInputs)},
                {"tensor_format", d.format->name()}};
      // A Python function: what `python -m mate replay` imports to run it again.
      if (call.python != nullptr) d.meta["python"] = {{"function", call.python->function}, {"script", call.python->script}};
      d.meta["inputs"] = describe_all(inputs, "inputs", *d.format, phase);
      in = d.format->estimate_size(phase.tensors);
      // Inputs, as much again for the outputs, and call.json as now (long strings and lists
      // count) while a later version replaces it.
      d.reserved = 2 * in + 2 * metadata_text(d.meta).size() + kMetadataSlack;
      if (s.totals.bytes + s.reserved + d.reserved > s.settings.max_bytes) {
        ++s.totals.skipped_size;
        if (!s.warned_size) {
          s.warned_size = true;
          warn("dump size cap reached: MATE_DUMP_MAX_SIZE_GB=" + fmt_gb(s.settings.max_gb) + " (" +
               std::to_string(s.settings.max_bytes) + " bytes); " + std::to_string(s.totals.bytes) +
               " bytes dumped, the dump of " + call.name + " needs up to " + std::to_string(d.reserved) +
               "; further calls that do not fit are not dumped (raise MATE_DUMP_MAX_SIZE_GB to dump more)");
        }
        return;
      }
      if (!ensure_root_locked(s)) return;
      show_banner_locked(s);
      if (s.first_started.empty() || s.first_pid != ::getpid()) {
        s.first_started = d.meta["started"].get<std::string>();
        s.first_pid = ::getpid();
      }
      d.meta["process_first_started"] = s.first_started;
      ++s.totals.calls;
      s.reserved += d.reserved;
    }
    char seq[32];
    std::snprintf(seq, sizeof seq, "%08llu", static_cast<unsigned long long>(call.seq));
    d.dir = s.settings.root + "/" + core::utc_now_for_file_name() + "_pid" + std::to_string(::getpid()) + "_call" + seq + "_" + sanitize(call.name);
    int made = ::mkdir(d.dir.c_str(), 0700);
    if (made != 0 && errno == ENOENT) {
      // The root was removed while the process runs (someone cleaned up the dumps): create it
      // again, 0700, and retry once.
      std::lock_guard lock(s.mutex);
      s.root_ready = false;
      if (ensure_root_locked(s)) made = ::mkdir(d.dir.c_str(), 0700);
      else errno = ENOENT;
    }
    if (made != 0) return fail(d, std::string("cannot create ") + d.dir + ": " + std::strerror(errno), false);
    std::string error;
    if (!publish(d, &error)) return fail(d, error, true);
    d.pending = in;
    error = write_tensors(d.dir, *d.format, phase, d.meta, d.written);
    d.pending = 0;
    if (!error.empty()) return fail(d, error, true);
    d.meta["status"] = to_string(CallStatus::InputsSaved);
    if (!publish(d, &error)) return fail(d, error, true);
    std::lock_guard lock(s.mutex);
    s.active.emplace(call.seq, std::move(d));
  }

  void after(const log::CallInfo& call, const std::vector<log::Arg>& outputs, const log::CallOutcome& outcome) override {
    if (call.level < 10) return;
    State& s = state();
    ActiveDump d;
    {
      std::lock_guard lock(s.mutex);
      auto it = s.active.find(call.seq);
      if (it == s.active.end()) return;
      d = std::move(it->second);
      s.active.erase(it);
    }
    d.meta["finished"] = core::utc_now_iso8601_micros();
    d.meta["elapsed_us"] = outcome.elapsed_us;
    std::string error;
    if (outcome.threw) {
      d.meta["status"] = to_string(CallStatus::Raised);
      d.meta["exception"] = {{"type", outcome.exception_type}, {"message", outcome.exception_message}};
      if (!reserve_up_to(d, room_for(d, d.meta, 0), std::string("the exception message of ") + call.name + " is cut"))
        cut_message(d.meta["exception"]);
      if (!publish(d, &error)) return fail(d, error, true);
      return finish(d);
    }
    Phase phase;
    d.meta["outputs"] = describe_all(outputs, "outputs", *d.format, phase);
    d.meta["status"] = to_string(CallStatus::Completed);  // measured as it will be written
    const std::uint64_t need = d.format->estimate_size(phase.tensors);
    const std::string lost = std::string("the outputs of ") + call.name + " are not saved";
    if (!reserve_up_to(d, room_for(d, d.meta, need), lost)) {
      // The outputs do not fit under the size cap: recorded as not saved, never half-written.
      for (const json::json_pointer& slot : phase.slots) d.meta[slot]["error"] = kNotSaved;
      phase = {};
      // Nor may their values in call.json (a long returned string or list).
      if (!reserve_up_to(d, room_for(d, d.meta, 0), lost)) drop_output_values(d.meta["outputs"]);
    }
    d.pending = phase.tensors.empty() ? 0 : need;
    error = write_tensors(d.dir, *d.format, phase, d.meta, d.written);
    d.pending = 0;
    if (!error.empty()) return fail(d, error, true);
    if (!publish(d, &error)) return fail(d, error, true);
    finish(d);
  }

 private:
  // Replaces the call's reservation by the bytes it wrote (metadata included).
  static void finish(ActiveDump& d) {
    State& s = state();
    std::error_code ec;
    const auto meta = fs::file_size(d.dir + "/" + kCallFile, ec);
    std::lock_guard lock(s.mutex);
    s.reserved -= d.reserved;
    s.totals.bytes += d.written + (ec ? 0 : meta);
  }

  // An I/O error: mark the directory failed (or remove it), warn once, keep the API running.
  static void fail(ActiveDump& d, const std::string& error, bool dir_exists) {
    if (dir_exists) {
      d.meta["status"] = to_string(CallStatus::Failed);
      d.meta["error"] = error;
      if (d.meta.contains("inputs")) settle_pending(d.meta["inputs"], error);
      if (d.meta.contains("outputs")) settle_pending(d.meta["outputs"], error);
      if (!publish(d, nullptr)) {
        std::error_code ec;
        fs::remove_all(d.dir, ec);
        d.written = 0;
      }
    }
    State& s = state();
    {
      std::lock_guard lock(s.mutex);
      ++s.totals.failed;
      if (!s.warned_io) {
        s.warned_io = true;
        warn("dump failed: " + error + "; the call directory is marked failed, the API keeps running "
             "(further dump failures are counted, not reported)");
      }
    }
    finish(d);
  }
};

// Installs the hook when the program starts (the log reads its settings later, on first use).
const bool installed = [] {
  log::add_call_hook(detail::level10_hook());
  return true;
}();

}  // namespace

namespace detail {
// Extern, not file-local: a kernel library that links MATE statically and is loaded into a
// program that has MATE too (`mate replay --lib`, a Python process) binds this to the program's
// one writer, and add_call_hook ignores the second registration of the same hook (test
// replay.one_dump_writer_with_a_static_copy_of_mate).
log::CallHook* level10_hook() {
  static Writer* w = new Writer();  // never destroyed, like the log's hook list
  return w;
}
}  // namespace detail

void reconfigure() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  load_locked(s);
  s.totals = {};
  s.reserved = 0;
  s.banner_shown = s.root_ready = false;
  s.warned_count = s.warned_size = s.warned_io = false;
}

Totals totals() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  return s.totals;
}

}  // namespace mate::dump
