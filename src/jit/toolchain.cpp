#include "jit/toolchain.hpp"

#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <system_error>

#include <fmt/format.h>

#include "jit/hash.hpp"
#include "jit/process.hpp"
#include "mate/config.hpp"
#include "mate/core/atomic_file.hpp"
#include "mate/core/quiet_write.hpp"
#include "mate/device/driver.hpp"
#include "mate/device/vendors.hpp"

namespace mate::jit::detail {

namespace {

std::mutex& detector_mutex() {
  static std::mutex m;
  return m;
}
std::array<DeviceArchDetector, device::kKindCount>& detectors() {  // by device::Kind
  static std::array<DeviceArchDetector, device::kKindCount> d{};
  return d;
}

// The vendor row of a device toolchain; nullptr for the host toolchain.
const device::Vendor* vendor_of(Toolchain t) { return device::find_vendor(device_kind(t)); }

std::string variable_name(config::Var v) { return std::string(config::info(v).name); }

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  std::size_t i = 0;
  while (i < s.size() && (s[i] == '\n' || s[i] == ' ')) ++i;
  return s.substr(i);
}

std::string realpath_or_same(const std::string& path) {
  char buf[PATH_MAX];
  if (::realpath(path.c_str(), buf) != nullptr) return buf;
  return path;
}

// "9.0" -> "90", "10.0" -> "100"
std::string arch_digits(const std::string& arch) {
  std::string out;
  for (char c : arch)
    if (c != '.') out += c;
  return out;
}

struct CompilerChoice {
  std::string value;     // what to look for
  std::string variable;  // where it came from, for messages
  const char* fallback;  // vendor default path, or nullptr
};

CompilerChoice compiler_choice(Toolchain t) {
  const device::Vendor* v = vendor_of(t);
  if (v == nullptr) {
    std::string cxx = config::cxx();
    return {cxx.empty() ? "c++" : cxx, "CXX", nullptr};
  }
  std::string value = config::get(v->compiler_variable).text;
  return {value.empty() ? v->compiler : value, variable_name(v->compiler_variable), v->compiler_fallback};
}

// `flag` with every "{}" replaced by `digits`.
std::string arch_flag(std::string flag, const std::string& digits) {
  for (std::size_t at = flag.find("{}"); at != std::string::npos; at = flag.find("{}", at + digits.size()))
    flag.replace(at, 2, digits);
  return flag;
}

// Why `value` (a compiler variable's value) names no runnable program.
std::string not_found_reason(const std::string& value) {
  if (value.find('/') == std::string::npos) return "is not on PATH";
  std::error_code ec;
  std::string absolute = std::filesystem::absolute(value, ec).lexically_normal().string();
  std::string why = program_problem(absolute);
  return absolute == value ? why : fmt::format("{} (as {})", why, absolute);
}

std::string identity(const std::string& invoked, const std::string& memo_dir) {
  std::string resolved = realpath_or_same(invoked);
  return fmt::format("{} ({})\n{}", invoked, resolved, compiler_version(invoked, resolved, memo_dir));
}

// The host compiler(s) a compiler with a separate host compiler (nvcc: the row's
// separate_host_compiler) will run, as key text, and the arguments that choose it. CXX, when
// set, is passed as -ccbin (builds honour CXX for host code; -ccbin also beats NVCC_CCBIN).
// Otherwise nvcc takes NVCC_CCBIN (the row's host_compiler_variable: a program or a directory
// holding gcc and g++), else gcc and g++ on PATH: a wrapper first on PATH changes the binary, so
// it changes the key. Returns a problem ("" when none).
std::string resolve_separate_host_compiler(const device::Vendor& v, ToolchainResolution& r,
                                           const std::string& memo_dir) {
  std::string cxx = config::cxx();
  if (!cxx.empty()) {
    auto found = find_program(cxx);
    if (!found)
      return fmt::format("CXX='{}' ({}'s host compiler, passed as -ccbin) {}", cxx, v.compiler,
                         not_found_reason(cxx));
    r.compiler_args = {"-ccbin", *found};
    r.host_compiler = identity(*found, memo_dir);
    return "";
  }
  std::vector<std::string> programs;
  std::string ccbin = v.host_compiler_variable ? config::get(*v.host_compiler_variable).text : "";
  std::error_code ec;
  if (!ccbin.empty() && std::filesystem::is_directory(ccbin, ec)) {
    programs = {ccbin + "/gcc", ccbin + "/g++"};
  } else if (!ccbin.empty()) {
    programs = {ccbin};
  } else {
    programs = {"gcc", "g++"};
  }
  for (const auto& p : programs) {
    auto found = find_program(p);
    // The compiler reports a host compiler it cannot find; the key only tells the cases apart.
    r.host_compiler += (r.host_compiler.empty() ? "" : "\n") + (found ? identity(*found, memo_dir) : p + ": not found");
  }
  return "";
}

}  // namespace

std::string host_arch() {
  struct utsname u {};
  if (uname(&u) != 0) return "unknown";
  return u.machine;
}

std::vector<std::string> normalize_arch_list(std::vector<std::string> list) {
  // "09.0" and "9.0" are one arch; numbers too long to be an arch are kept as written.
  auto parts = [](const std::string& a) {
    std::size_t dot = a.find('.');
    auto number = [](const std::string& d) {
      bool digits = !d.empty() && d.size() <= 6 &&
                    std::all_of(d.begin(), d.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
      return digits ? std::stol(d) : -1L;
    };
    return dot == std::string::npos ? std::pair{-1L, -1L}
                                    : std::pair{number(a.substr(0, dot)), number(a.substr(dot + 1))};
  };
  for (auto& a : list) {
    auto [major, minor] = parts(a);
    if (major >= 0 && minor >= 0) a = fmt::format("{}.{}", major, minor);
  }
  std::sort(list.begin(), list.end(), [&](const std::string& a, const std::string& b) {
    auto pa = parts(a), pb = parts(b);
    return pa != pb ? pa < pb : a < b;
  });
  list.erase(std::unique(list.begin(), list.end()), list.end());
  return list;
}

std::optional<std::vector<std::string>> device_arch_list(Toolchain t, std::string* why) {
  const device::Vendor* v = vendor_of(t);
  if (v == nullptr) {
    if (why) *why = "the host toolchain has no device arch list";
    return std::nullopt;
  }
  std::vector<std::string> list = config::get(v->arch_list_variable).list;
  if (!list.empty()) return normalize_arch_list(std::move(list));
  DeviceArchDetector detector;
  {
    std::lock_guard<std::mutex> lock(detector_mutex());
    detector = detectors()[device::kind_index(v->kind)];
  }
  const char* kind = v->title;
  const std::string variable = variable_name(v->arch_list_variable);
  if (detector == nullptr) {
    // Default: ask the driver backend which devices are visible.
    device::DriverProbe probe = device::probe_driver(v->kind);
    for (const device::DeviceArch& a : probe.devices) list.push_back(device::to_string(a));
    if (list.empty()) {
      if (why)
        *why = fmt::format("no {} arch list: {} is unset and no {} device was detected ({}); set {}, "
                           "e.g. {}=\"{}\"",
                           kind, variable, kind, probe.reason.empty() ? "no device" : probe.reason,
                           variable, variable, v->example_arch);
      return std::nullopt;
    }
    return normalize_arch_list(std::move(list));
  }
  list = detector();
  if (list.empty()) {
    if (why)
      *why = fmt::format("no {} arch list: {} is unset and no {} device is visible (set {})", kind,
                         variable, kind, variable);
    return std::nullopt;
  }
  return normalize_arch_list(std::move(list));
}

std::string compiler_version(const std::string& invoked, const std::string& resolved,
                             const std::string& memo_dir) {
  struct stat st {};
  if (::stat(resolved.c_str(), &st) != 0) st = {};
  // The invoked path is part of the stamp: wrappers such as ccache or a clang/clang++ pair
  // resolve to one executable but behave by the name they are run as.
  std::string stamp = fmt::format("{}|{}|{}|{}|{}|{}.{}|{}.{}", invoked, resolved, st.st_dev, st.st_ino,
                                  st.st_size, st.st_mtim.tv_sec, st.st_mtim.tv_nsec, st.st_ctim.tv_sec,
                                  st.st_ctim.tv_nsec);
  std::string memo_name = content_hash_hex(stamp).substr(0, 32);

  static std::mutex mutex;
  static std::map<std::string, std::string> in_process;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = in_process.find(memo_name);
    if (it != in_process.end()) return it->second;
  }
  std::string memo_path = memo_dir.empty() ? "" : memo_dir + "/" + memo_name + ".version";
  std::string version;
  bool have = false;
  if (!memo_path.empty()) {
    std::ifstream in(memo_path, std::ios::binary);
    if (in) {
      std::stringstream ss;
      ss << in.rdbuf();
      std::string text = ss.str();
      // The memo starts with the stamp it was made for, so a hash collision cannot mislead.
      std::string header = stamp + "\n";
      if (text.rfind(header, 0) == 0) {
        version = text.substr(header.size());
        have = true;
      }
    }
  }
  if (!have) {
    ProcessResult r;
    try {
      r = run_process({invoked, "--version"}, false);
    } catch (const std::system_error& e) {
      throw ModuleError(ModuleError::Kind::NotBuildable,
                        fmt::format("compiler {} cannot be run: {} (check that it is an executable compiler; "
                                    "a script needs a valid #! line)",
                                    invoked, e.code().message()));
    }
    if (!r.ok())
      throw ModuleError(ModuleError::Kind::NotBuildable,
                        fmt::format("compiler {} does not answer --version ({}):\n{}", invoked,
                                    r.describe_status(), r.output));
    version = trim(r.output);
    if (!memo_path.empty()) {
      // A memo is an optimisation: failing to keep one only means asking again next time.
      (void)core::create_directories(memo_dir, 0755);  // explicit mode, whatever the umask
      (void)core::write_file_atomically(memo_path, stamp + "\n" + version);
    }
  }
  std::lock_guard<std::mutex> lock(mutex);
  in_process[memo_name] = version;
  return version;
}

ToolchainResolution resolve_toolchain(Toolchain t, const std::string& memo_dir) {
  ToolchainResolution r;
  const device::Vendor* vendor = vendor_of(t);
  if (vendor == nullptr) {
    r.arch_list = {host_arch()};
    r.arch_dir = r.arch_list[0];
  } else {
    std::string why;
    auto list = device_arch_list(t, &why);
    if (list) {
      r.arch_list = *list;
      r.arch_dir = vendor->name;
      for (const auto& a : r.arch_list) {
        r.arch_dir += "_" + a;
        for (const char* flag : vendor->arch_flags) r.arch_flags.push_back(arch_flag(flag, arch_digits(a)));
      }
    } else {
      r.problem = why;
    }
  }

  CompilerChoice choice = compiler_choice(t);
  if (choice.value.find_first_of(" \t") != std::string::npos) {
    std::string p = fmt::format("{}='{}' holds more than one word; set it to one compiler program",
                                choice.variable, choice.value);
    r.problem = r.problem.empty() ? p : r.problem + "; " + p;
    return r;
  }
  auto found = detail::find_program(choice.value);
  if (!found && choice.fallback != nullptr && choice.value.find('/') == std::string::npos)
    found = detail::find_program(choice.fallback);
  if (!found) {
    std::string tool = vendor == nullptr ? "C++ compiler" : vendor->compiler;
    std::string p = fmt::format("{} not found: {}='{}' {} (set {} to a compiler program)", tool, choice.variable,
                                choice.value, not_found_reason(choice.value), choice.variable);
    if (choice.fallback != nullptr && choice.value.find('/') == std::string::npos)
      p = fmt::format("{} not found: not on PATH nor at {} (set {})", tool, choice.fallback, choice.variable);
    r.problem = r.problem.empty() ? p : r.problem + "; " + p;
    return r;
  }
  Compiler c;
  c.invoked = *found;
  c.resolved = realpath_or_same(*found);
  c.version = compiler_version(c.invoked, c.resolved, memo_dir);
  r.compiler = std::move(c);
  if (vendor != nullptr && vendor->separate_host_compiler) {
    if (std::string p = resolve_separate_host_compiler(*vendor, r, memo_dir); !p.empty())
      r.problem = r.problem.empty() ? p : r.problem + "; " + p;
  }
  return r;
}

}  // namespace mate::jit::detail

namespace mate::jit {

void set_device_arch_detector(device::Kind kind, DeviceArchDetector detector) {
  std::lock_guard<std::mutex> lock(detail::detector_mutex());
  detail::detectors()[device::kind_index(kind)] = detector;
}

}  // namespace mate::jit
