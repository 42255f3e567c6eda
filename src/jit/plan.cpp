// ModuleSpec -> Plan: validation, rendering, command lines and the key.
#include "jit/plan.hpp"

#include <fmt/format.h>

#include <set>

#include "jit/hash.hpp"
#include "jit/toolchain.hpp"
#include "mate/config.hpp"
#include "mate/device/vendors.hpp"

namespace mate::jit::detail {

namespace {

bool valid_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.';
}

[[noreturn]] void bad_spec(const std::string& message) {
  throw ModuleError(ModuleError::Kind::BadSpec, message);
}

void validate(const ModuleSpec& spec) {
  if (spec.name.empty() || spec.name[0] == '.')
    bad_spec(fmt::format("module name '{}' is invalid: use letters, digits, '_', '-' and '.', not "
                         "starting with '.'",
                         spec.name));
  for (char c : spec.name)
    if (!valid_name_char(c))
      bad_spec(fmt::format("module name '{}' is invalid: character '{}' is not one of letters, "
                           "digits, '_', '-', '.'",
                           spec.name, c));
  if (spec.sources.empty()) bad_spec(fmt::format("module '{}' has no sources", spec.name));
  std::set<std::string> seen;
  for (const auto& s : spec.sources) {
    bool ok = !s.filename.empty() && s.filename[0] != '.';
    for (char c : s.filename) ok = ok && valid_name_char(c);
    if (!ok)
      bad_spec(fmt::format("module '{}': source file name '{}' is invalid (a plain file name: "
                           "letters, digits, '_', '-', '.')",
                           spec.name, s.filename));
    if (!seen.insert(s.filename).second)
      bad_spec(fmt::format("module '{}': source file '{}' is listed twice", spec.name, s.filename));
  }
}

// The vendor row of a device toolchain (mate/device/vendors.hpp); nullptr for the host's.
const device::Vendor* vendor_of(Toolchain t) { return device::find_vendor(device_kind(t)); }

// Headers are never compiled (every vendor's header extension included); a device toolchain
// compiles every vendor's source extension and C++.
bool is_compiled(Toolchain t, const std::string& filename) {
  auto ends = [&](std::string_view e) {
    return filename.size() > e.size() && filename.compare(filename.size() - e.size(), e.size(), e) == 0;
  };
  if (ends(".h") || ends(".hpp") || ends(".inc")) return false;
  for (const device::Vendor& v : device::vendors())
    if (ends(v.header_extension)) return false;
  if (vendor_of(t) == nullptr) return ends(".cpp") || ends(".cc") || ends(".cxx") || ends(".c");
  for (const device::Vendor& v : device::vendors())
    if (ends(v.source_extension)) return true;
  return ends(".cpp") || ends(".cc");
}

std::vector<std::string> base_compile_flags(Toolchain t) {
  const device::Vendor* v = vendor_of(t);
  if (v == nullptr) return {"-std=c++17", "-O2", "-fPIC", "-fvisibility=hidden", "-Iinclude"};
  std::vector<std::string> flags{"-std=c++17", "-O2"};
  flags.insert(flags.end(), v->pic_flags.begin(), v->pic_flags.end());
  flags.insert(flags.end(), {"-Iinclude", kArchFlagsToken});
  return flags;
}

// The MATE_EXTRA_*FLAGS variable of the toolchain, by name, and its value.
std::pair<std::string, std::string> extra_flags(Toolchain t) {
  const device::Vendor* v = vendor_of(t);
  if (v == nullptr) return {"MATE_EXTRA_CFLAGS", config::extra_cflags()};
  return {std::string(config::info(v->extra_flags_variable).name), config::get(v->extra_flags_variable).text};
}

}  // namespace

std::vector<std::string> split_flags(const std::string& text) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : text) {
    if (c == ' ' || c == '\t' || c == '\n') {
      if (!cur.empty()) out.push_back(std::move(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}

std::string render_template(const std::string& module, const std::string& filename,
                            const std::string& text, const std::map<std::string, std::string>& params) {
  std::string out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    if (text.compare(i, 4, "{{{{") == 0) {
      out += "{{";
      i += 4;
      continue;
    }
    if (text.compare(i, 2, "{{") != 0) {
      out += text[i++];
      continue;
    }
    std::size_t end = text.find("}}", i + 2);
    if (end == std::string::npos) {
      out += text.substr(i);
      break;
    }
    std::string name = text.substr(i + 2, end - i - 2);
    auto it = params.find(name);
    if (it == params.end()) {
      std::string known;
      for (const auto& [k, v] : params) known += (known.empty() ? "" : ", ") + k;
      bad_spec(fmt::format("module '{}', source '{}': placeholder {{{{{}}}}} has no parameter "
                           "(parameters given: {})",
                           module, filename, name, known.empty() ? "none" : known));
    }
    out += it->second;
    i = end + 2;
  }
  return out;
}

std::string quote_arg(const std::string& arg) {
  bool safe = !arg.empty();
  for (char c : arg)
    safe = safe && (std::isalnum(static_cast<unsigned char>(c)) || std::string_view("_-./=+:,@%").find(c) != std::string_view::npos);
  std::string out;
  if (safe) {
    out = arg;
  } else {
    out = "'";
    for (char c : arg) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    out += "'";
  }
  return out;
}

std::string recorded_command(const BuildStep& step) {
  std::string out = kCompilerToken;
  for (const auto& a : step.args) out += " " + (a == kArchFlagsToken ? a : quote_arg(a));
  return out;
}

std::vector<std::string> expanded_argv(const Plan& plan, const BuildStep& step) {
  std::vector<std::string> argv{plan.compiler.invoked};
  argv.insert(argv.end(), plan.compiler_args.begin(), plan.compiler_args.end());
  for (const auto& a : step.args) {
    if (a == kArchFlagsToken) argv.insert(argv.end(), plan.arch_flags.begin(), plan.arch_flags.end());
    else argv.push_back(a);
  }
  return argv;
}

Plan make_plan(const ModuleSpec& spec, const std::string& memo_dir) {
  validate(spec);
  Plan plan;
  plan.spec = spec;
  for (const auto& src : spec.sources)
    plan.files.push_back({"src/" + src.filename, render_template(spec.name, src.filename, src.text, spec.params)});

  ToolchainResolution tc = resolve_toolchain(spec.toolchain, memo_dir);
  plan.arch_list = tc.arch_list;
  plan.arch = tc.arch_dir;
  plan.arch_flags = tc.arch_flags;
  plan.arch_known = !tc.arch_list.empty();
  plan.compiler_known = tc.compiler.has_value();
  if (tc.compiler) plan.compiler = *tc.compiler;
  plan.compiler_args = tc.compiler_args;
  plan.buildable = tc.problem.empty();
  plan.why_not_buildable = tc.problem;

  // Commands: one compile step per translation unit, then the link step.
  auto [extra_var, extra_value] = extra_flags(spec.toolchain);
  std::string ldflags_value = config::extra_ldflags();
  std::vector<std::string> objects;
  for (const auto& src : spec.sources) {
    if (!is_compiled(spec.toolchain, src.filename)) continue;
    BuildStep step;
    step.output = "obj/" + src.filename + ".o";
    step.inputs = {"src/" + src.filename};
    step.args = base_compile_flags(spec.toolchain);
    step.args.insert(step.args.end(), spec.cflags.begin(), spec.cflags.end());
    for (auto& f : split_flags(extra_value)) step.args.push_back(f);
    if (const device::Vendor* v = vendor_of(spec.toolchain))
      step.args.insert(step.args.end(), v->language_flags.begin(), v->language_flags.end());
    step.args.insert(step.args.end(), {"-c", step.inputs[0], "-o", step.output});
    objects.push_back(step.output);
    plan.steps.push_back(std::move(step));
  }
  if (objects.empty())
    bad_spec(fmt::format("module '{}' has no source to compile (only headers)", spec.name));
  BuildStep link;
  link.output = "module.so";
  link.inputs = objects;
  // A toolchain whose C++ runtime is static puts a copy of it into the module: kept private, as
  // in MATE's own libraries (CMakeLists.txt), so that its process-wide symbols cannot take over
  // those of the program's libstdc++.so. One -Xlinker word without commas (nvcc splits its value
  // at commas; GCC, clang and mcc pass it as it is); nothing changes with a shared runtime.
  link.args = {"-shared", "-Xlinker", "--exclude-libs=libstdc++.a:libsupc++.a:libstdc++_nonshared.a"};
  if (spec.toolchain != Toolchain::Host) link.args.push_back(kArchFlagsToken);
  link.args.insert(link.args.end(), objects.begin(), objects.end());
  link.args.insert(link.args.end(), {"-o", "module.so"});
  link.args.insert(link.args.end(), spec.ldflags.begin(), spec.ldflags.end());
  for (auto& f : split_flags(ldflags_value)) link.args.push_back(f);
  plan.steps.push_back(std::move(link));

  // The key inputs, in a fixed order (module-status reports the first that differs).
  auto& in = plan.inputs;
  in.push_back({"mate_version", MATE_VERSION_STRING});
  ContentHash headers;
  for (const auto& h : bundled_headers()) headers.update(h.path).update(std::string_view("\0", 1)).update(h.text);
  in.push_back({"bundled_headers", headers.hex()});
  in.push_back({"toolchain", std::string(to_string(spec.toolchain))});
  for (const auto& f : plan.files) in.push_back({"source " + f.path, content_hash_hex(f.text)});
  std::string arch_text;
  for (const auto& a : plan.arch_list) arch_text += (arch_text.empty() ? "" : " ") + a;
  in.push_back({kInputTargetArch, arch_text});
  in.push_back({kInputCompilerPath, plan.compiler_known ? plan.compiler.resolved : "unknown"});
  // The name it is run as: ccache and clang choose their behaviour by it.
  in.push_back({kInputCompilerInvoked, plan.compiler_known ? plan.compiler.invoked : "unknown"});
  in.push_back({kInputCompilerVersion, plan.compiler_known ? plan.compiler.version : "unknown"});
  const device::Vendor* vendor = vendor_of(spec.toolchain);
  if (vendor != nullptr && vendor->separate_host_compiler) {
    // nvcc compiles host code with another compiler and reads flags from its own environment:
    // both change the binary. (-ccbin is an argument of the compiler, like its path: the
    // recorded commands stay comparable between machines.)
    in.push_back({kInputHostCompiler, tc.host_compiler.empty() ? "unknown" : tc.host_compiler});
    if (vendor->host_compiler_variable)  // NVCC_CCBIN
      in.push_back({std::string(config::info(*vendor->host_compiler_variable).name),
                    config::get(*vendor->host_compiler_variable).text});
  }
  in.push_back({extra_var, extra_value});
  if (vendor != nullptr)
    for (config::Var v : vendor->compiler_environment)  // NVCC_PREPEND_FLAGS, NVCC_APPEND_FLAGS
      in.push_back({std::string(config::info(v).name), config::get(v).text});
  in.push_back({"MATE_EXTRA_LDFLAGS", ldflags_value});
  for (const auto& step : plan.steps) in.push_back({"command " + step.output, recorded_command(step)});

  if (plan.arch_known) {
    ContentHash key;
    for (const auto& i : in) key.update(i.name).update(std::string_view("\0", 1)).update(i.value).update(std::string_view("\0", 1));
    plan.key = key.hex().substr(0, 32);
  }
  return plan;
}

}  // namespace mate::jit::detail
