#include "jit/build.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <system_error>
#include <filesystem>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "jit/cache.hpp"
#include "jit/process.hpp"
#include "jit/verify.hpp"
#include "mate/config.hpp"
#include "mate/core/atomic_file.hpp"
#include "mate/core/quiet_write.hpp"
#include "mate/core/utc_time.hpp"

namespace mate::jit::detail {

namespace {

namespace fs = std::filesystem;

std::string ninja_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '$') out += "$$";
    else if (c == '\n') out += ' ';
    else out += c;
  }
  return out;
}

// The staging directory, known by its inode: it has vanished when its path no longer leads to
// it (`mate clear-cache` renamed the cache away, and perhaps another process made a new one).
struct StagingDir {
  std::string path;
  dev_t dev = 0;
  ino_t ino = 0;
  bool vanished() const {
    struct stat st {};
    return ::stat(path.c_str(), &st) != 0 || st.st_dev != dev || st.st_ino != ino;
  }
  [[noreturn]] void throw_vanished(const Plan& plan) const {
    throw CacheVanished(fmt::format("module '{}': the build directory {} was removed during the build (the cache "
                                    "was cleared)",
                                    plan.spec.name, path));
  }
};

StagingDir make_staging(const Plan& plan, const std::string& path) {
  remove_tree(path);  // only left over when a pid was reused
  if (::mkdir(path.c_str(), 0755) != 0)
    throw ModuleError(ModuleError::Kind::CacheError,
                      fmt::format("cannot create build directory {}: {} (check permissions and free disk space, "
                                  "or set MATE_WORKSPACE_BASE)",
                                  path, std::strerror(errno)));
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) StagingDir{path}.throw_vanished(plan);
  return StagingDir{path, st.st_dev, st.st_ino};
}

// Creates the directories of `relative` ("src/a.cpp": src; "obj/": obj) one level at a time
// inside the staging directory and never the staging directory itself: one renamed away by
// clear-cache must not be recreated in the fresh cache.
void make_parent_directories(const Plan& plan, const StagingDir& dir, const std::string& relative) {
  for (std::size_t at = relative.find('/'); at != std::string::npos; at = relative.find('/', at + 1)) {
    std::string sub = dir.path + "/" + relative.substr(0, at);
    if (::mkdir(sub.c_str(), 0755) != 0 && errno != EEXIST) {
      int error = errno;
      if (dir.vanished()) dir.throw_vanished(plan);
      throw ModuleError(ModuleError::Kind::CacheError,
                        fmt::format("cannot create directory {}: {} (check permissions and free disk space)", sub,
                                    std::strerror(error)));
    }
  }
}

// Writes a new file of the staging tree, mode 0644 (umask can only narrow it); false with errno
// set when it cannot be written whole.
bool write_new_file(const std::string& path, const std::string& text) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  int error = core::write_all(fd, text.data(), text.size(), core::StreamKind::Plain);
  if (::close(fd) != 0 && error == 0) error = errno;
  errno = error;
  return error == 0;
}

void write_file(const Plan& plan, const StagingDir& dir, const std::string& relative, const std::string& text) {
  make_parent_directories(plan, dir, relative);
  std::string path = dir.path + "/" + relative;
  if (!write_new_file(path, text)) {
    int error = errno;
    if (dir.vanished()) dir.throw_vanished(plan);
    throw ModuleError(ModuleError::Kind::CacheError,
                      fmt::format("cannot write {}: {} (check permissions and free disk space)", path,
                                  std::strerror(error)));
  }
}

// What the tools made under a permissive umask (a compiler's objects 0666, the linker's
// library 0777 under `umask 000`) loses group and other write before the entry is published:
// a published entry is immutable, and nobody else may change what later processes dlopen.
void drop_shared_write(const Plan& plan, const StagingDir& dir) {
  std::error_code ec;
  auto narrow = [&](const std::string& path) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0 || S_ISLNK(st.st_mode)) return;
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) == 0) return;
    if (::chmod(path.c_str(), st.st_mode & 07755) != 0) {
      int error = errno;
      if (dir.vanished()) dir.throw_vanished(plan);
      throw ModuleError(ModuleError::Kind::CacheError,
                        fmt::format("cannot remove group and other write permission from {}: {}", path,
                                    std::strerror(error)));
    }
  };
  narrow(dir.path);
  for (fs::recursive_directory_iterator it(dir.path, ec), end; !ec && it != end; it.increment(ec))
    narrow(it->path().string());
  if (ec && dir.vanished()) dir.throw_vanished(plan);
}

std::string build_ninja(const Plan& plan) {
  std::string n = "# Generated by MATE for module " + plan.spec.name + " (key " + plan.key + ").\n";
  n += "ninja_required_version = 1.5\nrule run\n  command = $cmd\n  description = $desc\n\n";
  for (const auto& step : plan.steps) {
    std::string cmd;
    for (const auto& a : expanded_argv(plan, step)) cmd += (cmd.empty() ? "" : " ") + quote_arg(a);
    std::string inputs;
    for (const auto& i : step.inputs) inputs += " " + i;
    n += "build " + step.output + ": run" + inputs + "\n";
    n += "  cmd = " + ninja_escape(cmd) + "\n";
    n += "  desc = " + (step.output == "module.so" ? std::string("link ") : std::string("compile ")) +
         step.output + "\n";
  }
  n += "default module.so\n";
  return n;
}

// The failing command from ninja's non-verbose output: the line after "FAILED: ".
std::string failing_command(const std::string& output) {
  std::size_t at = output.find("FAILED: ");
  if (at == std::string::npos) return "";
  std::size_t line_end = output.find('\n', at);
  if (line_end == std::string::npos) return "";
  std::size_t next_end = output.find('\n', line_end + 1);
  return output.substr(line_end + 1, next_end == std::string::npos ? std::string::npos : next_end - line_end - 1);
}

int ninja_jobs() {
  std::int64_t jobs = config::max_jobs();
  if (jobs > 0) return static_cast<int>(jobs);
  unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 2 : static_cast<int>(hw);
}

}  // namespace

std::string build_in_staging(const Plan& plan, const std::string& parent, BuildStamp stamp) {
  static std::atomic<unsigned> counter{0};
  // Read (and validated: an invalid value throws ConfigError) before anything is on disk, so
  // that a bad MAX_JOBS or MATE_JIT_VERBOSE leaves no staging directory behind.
  const int jobs = ninja_jobs();
  const bool verbose = config::jit_verbose();
  make_directories(parent);
  const StagingDir dir = make_staging(
      plan, fmt::format("{}/.staging-{}-{}-{}-{}", parent, plan.key, hostname(), getpid(), counter++));
  const std::string& staging = dir.path;
  for (const auto& f : plan.files) write_file(plan, dir, f.path, f.text);
  for (const auto& h : bundled_headers()) write_file(plan, dir, h.path, h.text);
  make_parent_directories(plan, dir, "obj/");
  write_file(plan, dir, "build.ninja", build_ninja(plan));

  auto ninja = find_program("ninja");
  if (!ninja) ninja = find_program("ninja-build");
  if (!ninja) {
    remove_tree(staging);
    throw ModuleError(ModuleError::Kind::NotBuildable,
                      fmt::format("cannot build module '{}': ninja not found on PATH (install "
                                  "ninja-build)",
                                  plan.spec.name));
  }
  std::vector<std::string> argv{*ninja, "-C", staging, "-j", std::to_string(jobs)};
  if (verbose) argv.push_back("-v");
  // Always one line when a build starts and one when it ends: builds are rare and take seconds,
  // and a user wants to know why the first call was slow.
  const std::size_t sources = plan.steps.size() - 1;  // every step but the link compiles one source
  std::fprintf(stderr, "mate: building module '%s' (key %s) with %zu source%s%s%s ...\n", plan.spec.name.c_str(),
               plan.key.c_str(), sources, sources == 1 ? "" : "s", verbose ? " in " : "",
               verbose ? staging.c_str() : "");
  auto start = std::chrono::steady_clock::now();
  ProcessResult r;
  try {
    r = run_process(argv, verbose);
  } catch (const std::system_error& e) {
    std::fprintf(stderr, "mate: module '%s' (key %s) FAILED: ninja could not be started\n", plan.spec.name.c_str(),
                 plan.key.c_str());
    remove_tree(staging);
    throw ModuleError(ModuleError::Kind::NotBuildable,
                      fmt::format("cannot build module '{}': {}: {} (check that it is an executable ninja)",
                                  plan.spec.name, *ninja, e.code().message()));
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // A build in a directory renamed away may have failed (its sources deleted) or succeeded into
  // the trash: either way it is not this module's result, and not a failure to report.
  if (dir.vanished()) {
    std::fprintf(stderr, "mate: module '%s' (key %s) abandoned after %.1f s: its build directory was removed "
                 "(the cache was cleared)\n", plan.spec.name.c_str(), plan.key.c_str(), seconds);
    dir.throw_vanished(plan);
  }
  std::fprintf(stderr, "mate: module '%s' (key %s) %s in %.1f s\n", plan.spec.name.c_str(), plan.key.c_str(),
               r.ok() ? "done" : "FAILED", seconds);
  if (!verbose) (void)write_new_file(staging + "/build.log", r.output);  // for inspection only
  if (!r.ok()) {
    std::string cmd = failing_command(r.output);
    std::string message = fmt::format("building module '{}' (key {}) failed: ninja {}\n", plan.spec.name, plan.key,
                                      r.describe_status());
    if (!cmd.empty()) message += "failing command:\n  " + cmd + "\n";
    if (verbose) message += "(the build output is above: MATE_JIT_VERBOSE=1)\n";
    else message += "build output:\n" + r.output;
    message += fmt::format("build directory kept for inspection: {}\n", staging);
    throw ModuleError(ModuleError::Kind::BuildFailed, message);
  }

  drop_shared_write(plan, dir);
  Manifest m = manifest_for(plan);
  m.built_at = core::utc_now_iso8601();
  m.build_seconds = seconds;
  struct stat st {};
  if (::stat((staging + "/module.so").c_str(), &st) == 0) m.size = static_cast<std::uint64_t>(st.st_size);
  // The content hash every later load checks before its dlopen (verify.hpp, check_library).
  std::string hash_error;
  std::optional<FileIdentity> identity;
  auto hash = library_content_hash(staging + "/module.so", &hash_error, &identity);
  if (hash && !identity && stamp == BuildStamp::Write) {
    // The link ended in this tick of the file clock: once it is past, a stamp can vouch for the
    // bytes (verify.hpp). 20 ms covers a tick at HZ=100; nothing next to a build.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    hash = library_content_hash(staging + "/module.so", &hash_error, &identity);
  }
  if (hash) {
    m.library_hash = *hash;
    // The publishing rename moves the directory, not the library: its identity stays, so the
    // first warm hit need not hash it again.
    if (stamp == BuildStamp::Write && identity) write_stamp(entry_stamp(staging, m), *identity, *hash);
  } else {
    if (dir.vanished()) dir.throw_vanished(plan);
    throw ModuleError(ModuleError::Kind::CacheError,
                      fmt::format("module '{}' was built but {}", plan.spec.name, hash_error));
  }
  std::string failed_step;
  if (auto ec = core::write_file_atomically(staging + "/manifest.json", to_json(m).dump(2) + "\n", 0644, &failed_step)) {
    if (dir.vanished()) dir.throw_vanished(plan);
    throw ModuleError(ModuleError::Kind::CacheError,
                      fmt::format("cannot write {}/manifest.json: {} ({})", staging, ec.message(), failed_step));
  }
  return staging;
}

Publish publish(const std::string& staging, const std::string& final_dir) {
  if (::rename(staging.c_str(), final_dir.c_str()) == 0) return Publish::Published;
  if (errno == EEXIST || errno == ENOTEMPTY) return Publish::AlreadyThere;
  if (errno == ENOENT) return Publish::ParentGone;
  throw ModuleError(ModuleError::Kind::CacheError,
                    fmt::format("cannot publish {} as {}: {}", staging, final_dir, std::strerror(errno)));
}

void remove_dead_staging(const std::string& parent, const std::string& key) {
  std::string prefix = fmt::format(".staging-{}-{}-", key, hostname());
  std::error_code ec;
  for (fs::directory_iterator it(parent, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    long pid = std::strtol(name.c_str() + prefix.size(), nullptr, 10);
    if (pid <= 0) continue;
    if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) remove_tree(it->path().string());
  }
}

}  // namespace mate::jit::detail
