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
#include "mate/device/driver.hpp"

namespace mate::jit::detail {

namespace {

std::mutex& detector_mutex() {
  static std::mutex m;
  return m;
}
std::array<DeviceArchDetector, 3>& detectors() {
  static std::array<DeviceArchDetector, 3> d{};
  return d;
}

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
  const char* variable;  // where it came from, for messages
  const char* fallback;  // vendor default path, or nullptr
};

CompilerChoice compiler_choice(Toolchain t) {
  switch (t) {
    case Toolchain::Host: {
      std::string cxx = config::cxx();
      return {cxx.empty() ? "c++" : cxx, "CXX", nullptr};
    }
    case Toolchain::Cuda: {
      std::string nvcc = config::nvcc();
      return {nvcc.empty() ? "nvcc" : nvcc, "MATE_NVCC", "/usr/local/cuda/bin/nvcc"};
    }
    case Toolchain::Musa: {
      std::string mcc = config::mcc();
      return {mcc.empty() ? "mcc" : mcc, "MATE_MCC", "/usr/local/musa/bin/mcc"};
    }
  }
  return {"c++", "CXX", nullptr};
}

const char* arch_variable(Toolchain t) {
  return t == Toolchain::Cuda ? "MATE_CUDA_ARCH_LIST" : "MATE_MUSA_ARCH_LIST";
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

// The host compiler(s) nvcc will run, as key text, and the arguments that choose it. CXX, when
// set, is passed as -ccbin (builds honour CXX for host code; -ccbin also beats NVCC_CCBIN).
// Otherwise nvcc takes NVCC_CCBIN (a program or a directory holding gcc and g++), else gcc and
// g++ on PATH: a wrapper first on PATH changes the binary, so it changes the key.
// Returns a problem ("" when none).
std::string resolve_nvcc_host_compiler(ToolchainResolution& r, const std::string& memo_dir) {
  std::string cxx = config::cxx();
  if (!cxx.empty()) {
    auto found = find_program(cxx);
    if (!found)
      return fmt::format("CXX='{}' (nvcc's host compiler, passed as -ccbin) {}", cxx, not_found_reason(cxx));
    r.compiler_args = {"-ccbin", *found};
    r.host_compiler = identity(*found, memo_dir);
    return "";
  }
  std::vector<std::string> programs;
  std::string ccbin = config::nvcc_ccbin();
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
    // nvcc reports a host compiler it cannot find; the key only needs to tell the cases apart.
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
  std::vector<std::string> list = t == Toolchain::Cuda ? config::cuda_arch_list() : config::musa_arch_list();
  if (!list.empty()) return normalize_arch_list(std::move(list));
  DeviceArchDetector detector;
  {
    std::lock_guard<std::mutex> lock(detector_mutex());
    detector = detectors()[t == Toolchain::Cuda ? 1 : 2];
  }
  const char* kind = t == Toolchain::Cuda ? "CUDA" : "MUSA";
  if (detector == nullptr) {
    // Default: ask the driver backend which devices are visible.
    device::DriverProbe probe = device::probe_driver(t == Toolchain::Cuda ? device::Kind::Cuda : device::Kind::Musa);
    for (const device::DeviceArch& a : probe.devices) list.push_back(device::to_string(a));
    if (list.empty()) {
      if (why)
        *why = fmt::format("no {} arch list: {} is unset and no {} device was detected ({}); set {}, "
                           "e.g. {}=\"{}\"",
                           kind, arch_variable(t), kind, probe.reason.empty() ? "no device" : probe.reason,
                           arch_variable(t), arch_variable(t), t == Toolchain::Cuda ? "9.0" : "3.1");
      return std::nullopt;
    }
    return normalize_arch_list(std::move(list));
  }
  list = detector();
  if (list.empty()) {
    if (why)
      *why = fmt::format("no {} arch list: {} is unset and no {} device is visible (set {})", kind,
                         arch_variable(t), kind, arch_variable(t));
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
      std::error_code ec;
      std::filesystem::create_directories(memo_dir, ec);
      (void)core::write_file_atomically(memo_path, stamp + "\n" + version);
    }
  }
  std::lock_guard<std::mutex> lock(mutex);
  in_process[memo_name] = version;
  return version;
}

ToolchainResolution resolve_toolchain(Toolchain t, const std::string& memo_dir) {
  ToolchainResolution r;
  if (t == Toolchain::Host) {
    r.arch_list = {host_arch()};
    r.arch_dir = r.arch_list[0];
  } else {
    std::string why;
    auto list = device_arch_list(t, &why);
    if (list) {
      r.arch_list = *list;
      r.arch_dir = std::string(t == Toolchain::Cuda ? "cuda" : "musa");
      for (const auto& a : r.arch_list) {
        r.arch_dir += "_" + a;
        if (t == Toolchain::Cuda) {
          std::string d = arch_digits(a);
          r.arch_flags.push_back("-gencode");
          r.arch_flags.push_back(fmt::format("arch=compute_{},code=sm_{}", d, d));
        } else {
          r.arch_flags.push_back("--offload-arch=mp_" + arch_digits(a));
        }
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
    std::string tool = t == Toolchain::Host ? "C++ compiler" : t == Toolchain::Cuda ? "nvcc" : "mcc";
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
  if (t == Toolchain::Cuda) {
    if (std::string p = resolve_nvcc_host_compiler(r, memo_dir); !p.empty())
      r.problem = r.problem.empty() ? p : r.problem + "; " + p;
  }
  return r;
}

}  // namespace mate::jit::detail

namespace mate::jit {

void set_device_arch_detector(device::Kind kind, DeviceArchDetector detector) {
  std::lock_guard<std::mutex> lock(detail::detector_mutex());
  detail::detectors()[static_cast<std::size_t>(kind)] = detector;
}

}  // namespace mate::jit
