// What `mate env` prints (text, JSON, Markdown), generated from the registry; see env_report.hpp.
#include "env_report.hpp"

#include <sys/stat.h>

#include <cerrno>

#include <fmt/format.h>

namespace mate::config {

namespace {

// Why a path variable's value cannot serve, or "": a directory variable naming something else
// that exists (MATE_DUMP_DIR=/etc/passwd), a compiler variable whose path (not a bare name) is a
// directory, or an absolute one that does not exist. Parsing alone accepts them; the runtime
// then fails far from here. (stat, not std::filesystem: this file is linked into the guard's
// preload library.)
std::string path_problem(const VarInfo& v, const std::string& value) {
  if (value.empty()) return "";
  struct stat st {};
  const bool exists = ::stat(value.c_str(), &st) == 0;
  const bool through_a_file = !exists && errno == ENOTDIR;  // a component on the way is not a directory
  if (v.id == Var::MATE_DUMP_DIR || v.id == Var::MATE_WORKSPACE_BASE) {
    if (exists && !S_ISDIR(st.st_mode))
      return fmt::format("{}='{}' is invalid: it exists and is not a directory; accepted: a directory (made when "
                         "missing)", v.name, value);
    if (through_a_file) {
      // Name the component that is in the way: the longest prefix that exists and is no directory.
      std::string blocker = value;
      for (std::size_t slash = value.rfind('/'); slash != std::string::npos && slash > 0; slash = value.rfind('/', slash - 1)) {
        const std::string prefix = value.substr(0, slash);
        if (::stat(prefix.c_str(), &st) == 0) {
          if (!S_ISDIR(st.st_mode)) blocker = prefix;
          break;
        }
      }
      return fmt::format("{}='{}' is invalid: {} is not a directory, so the directory cannot be made there; "
                         "accepted: a directory (made when missing)", v.name, value, blocker);
    }
  } else if ((v.id == Var::MATE_NVCC || v.id == Var::MATE_MCC) && value.find('/') != std::string::npos) {
    // A bare name is looked for on PATH at run time, never in the current directory.
    if (exists && S_ISDIR(st.st_mode))
      return fmt::format("{}='{}' is invalid: a directory; accepted: the compiler's path", v.name, value);
    if (!exists && value[0] == '/')
      return fmt::format("{}='{}' is invalid: no such file; accepted: the compiler's path", v.name, value);
  }
  return "";
}

VariableReport report_known(const VarInfo& v) {
  VariableReport r;
  r.info = &v;
  r.name = std::string(v.name);
  r.source = source(v.id);
  r.value = raw(v.id).value_or(std::string(r.source == Source::Default ? v.shown_default : ""));
  try {
    (void)get(v.id);
    if (std::string why = r.source != Source::Default ? path_problem(v, r.value) : ""; !why.empty()) {
      r.valid = false;
      r.error = std::move(why);
    } else if (v.id == Var::MATE_PYTEST_SHARD_INDEX) {
      // The one rule between two variables; the test programs refuse to start on it.
      r.error = shard_index_error(pytest_shard_index(), pytest_shard_total());
      r.valid = r.error.empty();
    }
  } catch (const ConfigError& e) {
    r.valid = false;
    r.error = e.what();
  }
  return r;
}

bool listed_in_all(const VarInfo& v, const EnvReportOptions& o) {
  return v.category == Category::Public || o.internal;
}

// PATH and HOME are registered because JIT builds read them, but every shell sets them: the
// plain `mate env` (what is set that affects MATE) leaves them to `--all --internal`.
bool ambient(const VarInfo& v) { return v.name == "PATH" || v.name == "HOME"; }

// Wraps a paragraph to `width` columns with `indent` spaces in front of every line.
std::string wrap(std::string_view text, std::size_t width, std::size_t indent) {
  std::string out, line;
  auto flush = [&] {
    out += std::string(indent, ' ') + line + "\n";
    line.clear();
  };
  std::size_t i = 0;
  while (i < text.size()) {
    std::size_t j = text.find(' ', i);
    if (j == std::string_view::npos) j = text.size();
    std::string_view word = text.substr(i, j - i);
    if (!line.empty() && line.size() + 1 + word.size() > width) flush();
    if (!line.empty()) line += ' ';
    line += word;
    i = j + 1;
  }
  if (!line.empty()) flush();
  return out;
}

std::string escape_cell(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += "\\|";
    else out += c;
  }
  return out;
}

}  // namespace

std::vector<VariableReport> collect(const EnvReportOptions& options) {
  std::vector<VariableReport> rows;
  for (const VarInfo& v : all_variables()) {
    if (options.all ? listed_in_all(v, options) : is_set(v.id) && !ambient(v)) rows.push_back(report_known(v));
  }
  for (const UnknownVariable& u : unknown_variables()) {
    VariableReport r;
    r.name = u.name;
    r.value = u.value;
    r.source = Source::Environment;
    r.valid = false;
    r.suggestion = u.suggestion;
    r.error = u.suggestion.empty() ? "unknown variable"
                                   : fmt::format("unknown variable (did you mean {}?)", u.suggestion);
    rows.push_back(std::move(r));
  }
  return rows;
}

std::string render_text(const std::vector<VariableReport>& rows, const EnvReportOptions& options) {
  std::string out;
  if (!options.all) {
    if (rows.empty())
      return "No MATE-related variables are set. `mate env --all` lists every variable.\n";
    for (const VariableReport& r : rows) {
      std::string status = r.valid ? "ok" : "INVALID: " + r.error;
      if (r.info == nullptr) status = r.error;
      out += fmt::format("{}={}\n    {}\n", r.name, r.value, status);
    }
    return out;
  }
  for (const VariableReport& r : rows) {
    if (r.info == nullptr) {
      out += fmt::format("{}={}\n    {}\n\n", r.name, r.value, r.error);
      continue;
    }
    const VarInfo& v = *r.info;
    out += fmt::format("{}  [{}, {}, read {}]\n", v.name, to_string(v.type), to_string(v.category),
                       v.policy == Policy::Latched ? "once" : "live");
    out += fmt::format("    value:   {} ({})\n", r.value, to_string(r.source));
    out += fmt::format("    default: {}\n", v.shown_default);
    out += fmt::format("    accepts: {}\n", accepted_values(v.id));
    if (!r.valid) out += fmt::format("    INVALID: {}\n", r.error);
    out += wrap(v.doc, 88, 4) + "\n";
  }
  return out;
}

nlohmann::json render_json(const std::vector<VariableReport>& rows) {
  nlohmann::json vars = nlohmann::json::array(), unknown = nlohmann::json::array();
  for (const VariableReport& r : rows) {
    if (r.info == nullptr) {
      unknown.push_back({{"name", r.name}, {"value", r.value}, {"suggestion", r.suggestion}});
      continue;
    }
    const VarInfo& v = *r.info;
    nlohmann::json j = {{"name", r.name},
                        {"type", to_string(v.type)},
                        {"category", to_string(v.category)},
                        {"policy", to_string(v.policy)},
                        {"default", v.default_value},
                        {"shown_default", v.shown_default},
                        {"accepts", accepted_values(v.id)},
                        // The text in effect: null when unset without a default (shown_default
                        // says what happens then).
                        {"value", r.source == Source::Default
                                      ? (v.default_value.empty() ? nlohmann::json() : nlohmann::json(v.default_value))
                                      : nlohmann::json(r.value)},
                        {"source", to_string(r.source)},
                        {"valid", r.valid},
                        {"doc", v.doc}};
    if (!r.valid) j["error"] = r.error;
    vars.push_back(std::move(j));
  }
  return {{"variables", vars}, {"unknown", unknown}};
}

std::string render_markdown() {
  std::string out =
      "<!-- Generated by `mate env --markdown` from include/mate/config_variables.inc. "
      "Do not edit; a test fails when this file is stale. -->\n"
      "# Environment variables\n\n"
      "MATE reads configuration from the process environment, only through its registry. "
      "Values are parsed strictly: booleans accept 1/0, true/false, yes/no, on/off (any case); "
      "numbers must be whole and in range; an empty value counts as unset. An invalid value is "
      "an error naming the variable, the value and what is accepted (`mate::config::ConfigError` "
      "in library code, exit status 2 from `mate`). A `MATE_*` variable MATE does not know gets "
      "one warning per process with a suggestion.\n\n"
      "*Read once*: read on first use and kept for the life of the process. *Live*: read on "
      "every use.\n\n"
      "`mate env` shows the variables set in the current shell; `mate env --all` every public "
      "one with its current value; `mate env --check` exits 1 when a set variable is invalid or "
      "unknown.\n";
  const std::pair<Category, const char*> sections[] = {
      {Category::Public, "Public"},
      {Category::Internal, "Internal (set by MATE itself, e.g. `mate guard-run`)"},
      {Category::TestOnly, "Test-only and diagnostic"},
      {Category::External, "Variables of other programs MATE reads"}};
  for (auto [category, title] : sections) {
    out += fmt::format("\n## {}\n\n", title);
    out += "| Variable | Type | Default | Accepts | Read | Meaning |\n";
    out += "|---|---|---|---|---|---|\n";
    for (const VarInfo& v : all_variables()) {
      if (v.category != category) continue;
      out += fmt::format("| `{}` | {} | {} | {} | {} | {} |\n", v.name, to_string(v.type),
                         escape_cell(v.shown_default), escape_cell(accepted_values(v.id)),
                         v.policy == Policy::Latched ? "once" : "live", escape_cell(v.doc));
    }
  }
  return out;
}

std::vector<std::string> problems(const std::vector<VariableReport>& rows) {
  std::vector<std::string> out;
  for (const VariableReport& r : rows) {
    if (r.valid) continue;
    out.push_back(r.info == nullptr ? fmt::format("{}: {}", r.name, r.error) : r.error);
  }
  return out;
}

}  // namespace mate::config
