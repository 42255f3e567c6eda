// The module cache with real processes: concurrent builders, a builder killed with SIGKILL
// midway, corrupt published entries, warm hits without subprocesses, and the mate commands.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "guard_test_mode.hpp"
#include "jit_test_support.hpp"
#include "subprocess.hpp"

namespace {

using mate::jit::testing::count_lines_with;
using mate::jit::testing::read_file;
using mate::jit::testing::TempDir;
using mate::testing::run;
using mate::testing::RunResult;
using ::testing::HasSubstr;
using ::testing::Not;
namespace fs = std::filesystem;

struct JitProcesses : ::testing::Test {
  TempDir dir;
  std::string cxx = mate::jit::testing::write_compiler_wrapper(dir.path);
  std::string workspace = dir.path + "/ws";

  std::map<std::string, std::string> env(std::map<std::string, std::string> extra = {}) const {
    extra["MATE_WORKSPACE_BASE"] = workspace;
    extra["CXX"] = cxx;
    extra["MAX_JOBS"] = "2";
    return extra;
  }
  static mate::testing::RunOptions with_env(std::map<std::string, std::string> e) {
    mate::testing::RunOptions o;
    o.env = std::move(e);
    return o;
  }
  RunResult probe(std::map<std::string, std::string> extra = {}) const {
    return run({JIT_PROBE, "--notice-ms", "200"}, with_env(env(std::move(extra))));
  }
  std::string log() const { return read_file(dir.path + "/cxx.log"); }
  int compiles() const { return count_lines_with(log(), " -c src/axpy.cpp"); }
  // .../cached_ops/mate_sample_axpy_f32_t64
  std::string module_dir() const {
    for (auto& arch : fs::directory_iterator(workspace + "/.cache/mate/" MATE_TEST_VERSION))
      if (fs::exists(arch.path() / "cached_ops/mate_sample_axpy_f32_t64"))
        return (arch.path() / "cached_ops/mate_sample_axpy_f32_t64").string();
    return "";
  }
  int entries_starting_with(const std::string& prefix) const {
    int n = 0;
    for (auto& e : fs::directory_iterator(module_dir()))
      if (e.path().filename().string().rfind(prefix, 0) == 0) ++n;
    return n;
  }
  static std::string field(const std::string& out, const std::string& name) {
    auto at = out.find(name + "=");
    if (at == std::string::npos) return "";
    auto end = out.find_first_of(" \n", at);
    return out.substr(at + name.size() + 1, end - at - name.size() - 1);
  }
};

TEST_F(JitProcesses, ConcurrentBuildersBuildOnceWhileTheOthersWaitSayOnWhomThenLoad) {
  constexpr int kProcesses = 4;
  std::vector<RunResult> results(kProcesses);
  std::vector<std::thread> threads;
  for (int i = 0; i < kProcesses; ++i)
    threads.emplace_back([&, i] { results[i] = probe({{"JIT_TEST_SLEEP", "1.5"}}); });
  for (auto& t : threads) t.join();

  int built = 0, cached = 0, told = 0;
  for (const auto& r : results) {
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_THAT(r.out, HasSubstr("result=ok"));
    built += field(r.out, "origin") == "jit-built";
    cached += field(r.out, "origin") == "jit-cache";
    if (r.err.find("being built by pid ") != std::string::npos) {
      ++told;
      EXPECT_THAT(r.err, HasSubstr("jit_probe")) << "the holder's command line";
      EXPECT_THAT(r.err, HasSubstr("waiting "));
    }
  }
  EXPECT_EQ(built, 1);
  EXPECT_EQ(cached, kProcesses - 1);
  EXPECT_GE(told, 1) << "a waiter says whom it waits on";
  EXPECT_EQ(compiles(), 1) << "exactly one build ran:\n" << log();
  EXPECT_EQ(entries_starting_with(".staging-"), 0);
}

TEST_F(JitProcesses, BuilderKilledMidwayLeavesTheCacheUsable) {
  { std::ofstream(dir.path + "/kill_builder") << "x"; }
  RunResult killed = probe();
  EXPECT_EQ(killed.term_signal, SIGKILL) << killed.out << killed.err;
  EXPECT_EQ(entries_starting_with(".staging-"), 1) << "the dead build's private directory is left";

  RunResult next = probe();
  ASSERT_EQ(next.exit_code, 0) << next.out << next.err;
  EXPECT_EQ(field(next.out, "origin"), "jit-built");
  EXPECT_THAT(next.out, HasSubstr("result=ok"));
  EXPECT_EQ(entries_starting_with(".staging-"), 0) << "the dead build's directory was cleaned up";

  RunResult warm = probe();
  EXPECT_EQ(field(warm.out, "origin"), "jit-cache") << warm.out << warm.err;
}

TEST_F(JitProcesses, ProcessThatLosesThePublishRaceLoadsItsOwnBuildAndDiscardsIt) {
  // Two builders of one key can only both build when the lock file is replaced under the first
  // (e.g. by clear-cache); simulate that by unlinking it while the first one compiles.
  RunResult first;
  std::thread a([&] { first = probe({{"JIT_TEST_SLEEP", "1.5"}}); });
  for (int i = 0; i < 500 && compiles() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(compiles(), 1);
  int unlinked = 0;
  for (auto& e : fs::directory_iterator(module_dir()))
    if (e.path().filename().string().rfind(".lock-", 0) == 0) unlinked += fs::remove(e.path());
  ASSERT_EQ(unlinked, 1);
  RunResult second = probe({{"JIT_TEST_SLEEP", "1.5"}});
  a.join();
  ASSERT_EQ(first.exit_code, 0) << first.err;
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_EQ(field(first.out, "origin"), "jit-built");
  EXPECT_EQ(field(second.out, "origin"), "jit-built");
  EXPECT_EQ(field(first.out, "path"), field(second.out, "path")) << "both report the published entry";
  EXPECT_EQ(compiles(), 2) << "both built";
  EXPECT_EQ(entries_starting_with(".staging-"), 0) << "the loser discarded its build";
  EXPECT_EQ(field(probe().out, "origin"), "jit-cache");
}

TEST_F(JitProcesses, ClearCacheDuringABuildAndANewBuilderInTheFreshCacheTheLoadStillSucceeds) {
  RunResult slow;
  std::thread a([&] { slow = probe({{"JIT_TEST_SLEEP", "3"}}); });
  for (int i = 0; i < 1000 && compiles() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(compiles(), 1) << "the slow build started";
  RunResult clear = run({MATE_BINARY, "clear-cache"}, with_env(env()));
  EXPECT_EQ(clear.exit_code, 0) << clear.err;
  // Another process makes the cache again and builds while the first one still compiles in the
  // directory that was removed: the first must notice and load, not report a build failure.
  RunResult fresh = probe();
  a.join();
  ASSERT_EQ(fresh.exit_code, 0) << fresh.out << fresh.err;
  EXPECT_EQ(field(fresh.out, "origin"), "jit-built");
  ASSERT_EQ(slow.exit_code, 0) << slow.out << slow.err;
  EXPECT_THAT(slow.out, HasSubstr("result=ok"));
  EXPECT_THAT(slow.err, HasSubstr("was removed during the build; building again"));
  EXPECT_EQ(field(slow.out, "origin"), "jit-cache") << "it loads what the other process published";
  EXPECT_EQ(field(slow.out, "path"), field(fresh.out, "path"));
  EXPECT_EQ(entries_starting_with(".staging-"), 0);
  EXPECT_EQ(field(probe().out, "origin"), "jit-cache");
}

TEST_F(JitProcesses, ClearCacheDuringTheOnlyBuildTheBuilderBuildsAgain) {
  RunResult slow;
  std::thread a([&] { slow = probe({{"JIT_TEST_SLEEP", "2"}}); });
  for (int i = 0; i < 1000 && compiles() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(compiles(), 1);
  RunResult clear = run({MATE_BINARY, "clear-cache"}, with_env(env()));
  EXPECT_EQ(clear.exit_code, 0) << clear.err;
  a.join();
  ASSERT_EQ(slow.exit_code, 0) << slow.out << slow.err;
  EXPECT_EQ(field(slow.out, "origin"), "jit-built");
  EXPECT_THAT(slow.err, Not(HasSubstr("FAILED"))) << "the build was not at fault";
  EXPECT_THAT(slow.err, HasSubstr("abandoned after "));
  EXPECT_THAT(slow.err, HasSubstr("its build directory was removed (the cache was cleared)"));
  EXPECT_EQ(compiles(), 2) << "built again in the fresh cache";
  EXPECT_TRUE(fs::exists(field(slow.out, "path")));
  EXPECT_EQ(field(probe().out, "origin"), "jit-cache");
}

// A clear-cache killed while deleting leaves its renamed-away directory; the next one removes
// it, but never one whose clear-cache is still alive (and deleting it).
TEST_F(JitProcesses, ClearCacheRemovesWhatAKilledClearCacheLeftButNotWhatALiveOneIsDeleting) {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  pid_t dead = fork();
  if (dead == 0) _exit(0);
  ASSERT_GT(dead, 0);
  ASSERT_EQ(waitpid(dead, nullptr, 0), dead);
  auto make_trash = [&](const std::string& parent, pid_t pid) {
    std::string trash = parent + "/.mate-trash-" + std::to_string(pid) + "-0@" + host;
    fs::create_directories(trash + "/x86_64/cached_ops/m");
    std::ofstream(trash + "/x86_64/cached_ops/m/module.so") << "0123456789";
    return trash;
  };
  std::string dead_version = make_trash(workspace + "/.cache/mate", dead);
  std::string dead_all = make_trash(workspace + "/.cache", dead);
  std::string alive = make_trash(workspace + "/.cache/mate", getpid());
  // Another host's, whose name would read as a dead pid of ours if parsed from the front.
  std::string other_host = workspace + "/.cache/mate/.mate-trash-" + std::to_string(dead) + "-0@" + host + "-x";
  fs::create_directories(other_host);
  RunResult clear = run({MATE_BINARY, "clear-cache"}, with_env(env()));
  ASSERT_EQ(clear.exit_code, 0) << clear.err;
  EXPECT_THAT(clear.out, HasSubstr("removed " + dead_version + ", left by an interrupted clear-cache"));
  EXPECT_THAT(clear.out, HasSubstr("removed " + dead_all + ", left by an interrupted clear-cache"));
  EXPECT_THAT(clear.out, Not(HasSubstr("nothing to remove"))) << clear.out;
  EXPECT_FALSE(fs::exists(dead_version));
  EXPECT_FALSE(fs::exists(dead_all));
  EXPECT_TRUE(fs::exists(alive + "/x86_64/cached_ops/m/module.so")) << "its owner is alive";
  EXPECT_TRUE(fs::exists(other_host)) << "another host's";
}

TEST_F(JitProcesses, CorruptLibraryIsSetAsideAndRebuilt) {
  RunResult first = probe();
  ASSERT_EQ(first.exit_code, 0) << first.err;
  std::string lib = field(first.out, "path");
  { std::ofstream(lib, std::ios::trunc) << "not an ELF file"; }
  RunResult second = probe();
  ASSERT_EQ(second.exit_code, 0) << second.out << second.err;
  EXPECT_EQ(field(second.out, "origin"), "jit-built");
  EXPECT_THAT(second.err, HasSubstr("module.so is not an ELF shared library"));
  EXPECT_THAT(second.err, HasSubstr("set aside as "));
  EXPECT_EQ(entries_starting_with(".corrupt-"), 1);
  EXPECT_EQ(compiles(), 2);
}

TEST_F(JitProcesses, TruncatedLibraryIsSetAsideByItsRecordedSizeAndOnlyTheNewestSetAsideIsKept) {
  for (int round = 1; round <= 2; ++round) {
    RunResult good = probe();
    ASSERT_EQ(good.exit_code, 0) << good.err;
    std::string lib = field(good.out, "path");
    auto size = fs::file_size(lib);
    fs::resize_file(lib, size / 2);  // still starts with the ELF magic
    RunResult next = probe();
    ASSERT_EQ(next.exit_code, 0) << next.out << next.err;
    EXPECT_EQ(field(next.out, "origin"), "jit-built");
    EXPECT_THAT(next.err, HasSubstr("module.so has " + std::to_string(size / 2) + " bytes but manifest.json recorded " +
                                     std::to_string(size)));
    EXPECT_EQ(entries_starting_with(".corrupt-"), 1) << "round " << round << ": older set-aside entries are removed";
  }
  EXPECT_EQ(compiles(), 3);
}

// Damage that keeps the ELF header and the size the manifest records: only the content hash
// tells. module-status says corrupt; the next load sets the entry aside (one warning naming
// where) and rebuilds it once, instead of failing every run or running damaged code.
void expect_set_aside_and_rebuilt_once(const JitProcesses& t, bool (*damage)(const std::string&)) {
  // Flags no AOT module of the build tree has: `mate` (next to build/<preset>/aot) and the probe
  // then both use the JIT cache.
  const std::map<std::string, std::string> flags{{"MATE_EXTRA_CFLAGS", "-DCORRUPT_TEST"}};
  RunResult first = t.probe(flags);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const std::string lib = JitProcesses::field(first.out, "path");
  const auto size = fs::file_size(lib);
  ASSERT_TRUE(damage(lib));
  ASSERT_EQ(fs::file_size(lib), size);
  RunResult status = run({MATE_BINARY, "module-status", "--json"}, JitProcesses::with_env(t.env(flags)));
  ASSERT_EQ(status.exit_code, 0) << status.err;
  bool seen = false;
  const nlohmann::json listed = nlohmann::json::parse(status.out);
  for (const auto& m : listed["modules"])
    if (m["name"] == "mate_sample_axpy_f32_t64") {
      seen = true;
      EXPECT_EQ(m["status"], "corrupt");
      EXPECT_THAT(m["detail"].get<std::string>(), HasSubstr("does not match the content hash"));
    }
  EXPECT_TRUE(seen) << status.out;
  RunResult filtered = run({MATE_BINARY, "module-status", "--filter", "corrupt"}, JitProcesses::with_env(t.env(flags)));
  EXPECT_THAT(filtered.out, HasSubstr("mate_sample_axpy_f32_t64")) << filtered.err;

  RunResult second = t.probe(flags);
  ASSERT_EQ(second.exit_code, 0) << "term signal " << second.term_signal << "\n" << second.out << second.err;
  EXPECT_EQ(JitProcesses::field(second.out, "origin"), "jit-built");
  EXPECT_THAT(second.out, HasSubstr("result=ok"));
  EXPECT_EQ(count_lines_with(second.err, "set aside as " + t.module_dir() + "/.corrupt-"), 1) << second.err;
  EXPECT_EQ(count_lines_with(second.err, "module.so does not match the content hash manifest.json recorded"), 1)
      << second.err;
  EXPECT_EQ(t.entries_starting_with(".corrupt-"), 1) << "kept for inspection";
  EXPECT_EQ(t.compiles(), 2) << "rebuilt once";
  RunResult third = t.probe(flags);
  EXPECT_EQ(JitProcesses::field(third.out, "origin"), "jit-cache") << third.err;
  EXPECT_EQ(third.err, "");
}

TEST_F(JitProcesses, LibraryWithIntactElfHeaderAndGarbageAfterIsSetAsideAndRebuilt) {
  expect_set_aside_and_rebuilt_once(*this, mate::jit::testing::garble_after_elf_header);
}

TEST_F(JitProcesses, SameSizeCorruptionOfTheCodeIsSetAsideAndRebuilt) {
  expect_set_aside_and_rebuilt_once(*this, mate::jit::testing::corrupt_code);
}

// A build stamps the library it publishes, so warm hits do not hash it; a same-size change of
// its code with its mtime put back moves its ctime all the same: hashed, set aside, rebuilt.
TEST_F(JitProcesses, StampedWarmHitIsNotHashedButAChangeKeepingSizeAndMtimeIsCaught) {
  RunResult first = probe();
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_EQ(field(first.out, "origin"), "jit-built");
  const std::string lib = field(first.out, "path");
  EXPECT_TRUE(fs::exists(fs::path(lib).parent_path() / "verified.json")) << "stamped when published";
  RunResult warm = probe();
  ASSERT_EQ(warm.exit_code, 0) << warm.err;
  EXPECT_EQ(field(warm.out, "origin"), "jit-cache");
  EXPECT_EQ(field(warm.out, "hashed"), "0") << "the stamp vouches for the library";

  struct stat before {}, after {};
  ASSERT_EQ(::stat(lib.c_str(), &before), 0);
  ASSERT_TRUE(mate::jit::testing::corrupt_code(lib));
  ASSERT_TRUE(mate::jit::testing::restore_times(lib, before));
  ASSERT_EQ(::stat(lib.c_str(), &after), 0);
  ASSERT_EQ(after.st_size, before.st_size);
  ASSERT_EQ(after.st_mtim.tv_sec, before.st_mtim.tv_sec);
  ASSERT_EQ(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);
  RunResult next = probe();
  ASSERT_EQ(next.exit_code, 0) << "term signal " << next.term_signal << "\n" << next.out << next.err;
  EXPECT_EQ(field(next.out, "origin"), "jit-built");
  EXPECT_THAT(next.err, HasSubstr("module.so does not match the content hash manifest.json recorded"));
  EXPECT_EQ(compiles(), 2) << "rebuilt once";
}

// What a stamp cannot see: bytes changed below the file system (here: damage, then a stamp
// forged to match the file's new fstat, as a disk flipping bits would leave it). Plain
// module-status trusts the stamp; --verify hashes, says corrupt and removes the stamp, and the
// next load sets the entry aside and rebuilds it.
TEST_F(JitProcesses, ModuleStatusVerifyFindsDamageNoStampCanSee) {
  // Flags no AOT module of the build tree has: `mate` then uses the JIT cache too.
  const std::map<std::string, std::string> flags{{"MATE_EXTRA_CFLAGS", "-DVERIFY_TEST"}};
  RunResult first = probe(flags);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const std::string lib = field(first.out, "path");
  const std::string stamp = fs::path(lib).parent_path().string() + "/verified.json";
  ASSERT_TRUE(fs::exists(stamp));
  ASSERT_TRUE(mate::jit::testing::corrupt_code(lib));
  struct stat st {};
  ASSERT_EQ(::stat(lib.c_str(), &st), 0);
  auto forged = nlohmann::json::parse(read_file(stamp));
  forged["dev"] = static_cast<std::uint64_t>(st.st_dev);
  forged["ino"] = static_cast<std::uint64_t>(st.st_ino);
  forged["size"] = static_cast<std::uint64_t>(st.st_size);
  forged["mtime_ns"] = std::int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec;
  forged["ctime_ns"] = std::int64_t{st.st_ctim.tv_sec} * 1'000'000'000 + st.st_ctim.tv_nsec;
  { std::ofstream(stamp, std::ios::trunc) << forged.dump(); }

  auto status_of = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {MATE_BINARY, "module-status", "--json"});
    RunResult r = run(args, JitProcesses::with_env(env(flags)));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    const nlohmann::json listed = nlohmann::json::parse(r.out);
    for (const auto& m : listed["modules"])
      if (m["name"] == "mate_sample_axpy_f32_t64") return m;
    return nlohmann::json();
  };
  EXPECT_EQ(status_of({})["status"], "jit-cached") << "the stamp vouches for it";
  nlohmann::json verified = status_of({"--verify"});
  EXPECT_EQ(verified["status"], "corrupt");
  EXPECT_THAT(verified["detail"].get<std::string>(), HasSubstr("does not match the content hash"));
  EXPECT_FALSE(fs::exists(stamp)) << "the stamp that vouched for damaged bytes is removed";
  EXPECT_EQ(status_of({})["status"], "corrupt") << "and plain status hashes again";

  RunResult next = probe(flags);
  ASSERT_EQ(next.exit_code, 0) << "term signal " << next.term_signal << "\n" << next.out << next.err;
  EXPECT_EQ(field(next.out, "origin"), "jit-built");
  EXPECT_THAT(next.err, HasSubstr("set aside as "));
}

// Processes that meet a missing or damaged stamp at once each hash the library and write the
// stamp atomically: all load, and the last stamp written is a good one.
TEST_F(JitProcesses, ConcurrentWarmHitsWithoutAGoodStampAllLoadAndLeaveAGoodOne) {
  RunResult first = probe();
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const std::string entry = fs::path(field(first.out, "path")).parent_path().string();
  const std::string stamp = entry + "/verified.json";
  const std::string good = read_file(stamp);
  const std::vector<std::pair<std::string, std::string>> rounds{
      {"missing", ""}, {"garbage", "{\"format\": 1, \"dev\": "}, {"cut short", good.substr(0, good.size() / 2)}};
  for (const auto& [what, text] : rounds) {
    SCOPED_TRACE(what);
    if (what == "missing") fs::remove(stamp);
    else std::ofstream(stamp, std::ios::trunc) << text;
    constexpr int kProcesses = 6;
    std::vector<RunResult> results(kProcesses);
    std::vector<std::thread> threads;
    for (int i = 0; i < kProcesses; ++i) threads.emplace_back([&, i] { results[i] = probe(); });
    for (auto& t : threads) t.join();
    for (const auto& r : results) {
      ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
      EXPECT_EQ(field(r.out, "origin"), "jit-cache");
      EXPECT_EQ(field(r.out, "result"), "ok");
      EXPECT_EQ(r.err, "");
    }
    EXPECT_EQ(read_file(stamp), good);
    EXPECT_EQ(field(probe().out, "hashed"), "0");
    for (const auto& e : fs::directory_iterator(entry))
      EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
  }
  EXPECT_EQ(compiles(), 1);
}

// Under `umask 000` what MATE creates in the cache is still not writable by group or others:
// the directories (0755), the files it writes, and what the compiler and linker made.
TEST_F(JitProcesses, CacheCreatedUnderUmask000IsNotWritableByOthers) {
  RunResult r = run({"/bin/sh", "-c", "umask 000; exec \"$0\" --notice-ms 200", JIT_PROBE}, with_env(env()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_FALSE(field(r.out, "path").empty()) << r.out;
  int checked = 0;
  for (auto it = fs::recursive_directory_iterator(workspace + "/.cache"); it != fs::recursive_directory_iterator();
       ++it) {
    struct stat st {};
    ASSERT_EQ(::lstat(it->path().c_str(), &st), 0);
    if (S_ISLNK(st.st_mode)) continue;
    EXPECT_EQ(st.st_mode & (S_IWGRP | S_IWOTH), 0u) << it->path() << " mode " << std::oct << (st.st_mode & 07777);
    if (S_ISDIR(st.st_mode)) {
      EXPECT_EQ(st.st_mode & 07777, 0755u) << it->path();
    }
    ++checked;
  }
  EXPECT_GT(checked, 10);
  struct stat st {};
  ASSERT_EQ(::stat(field(r.out, "path").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & (S_IWGRP | S_IWOTH), 0u) << "module.so";
}

TEST_F(JitProcesses, CorruptManifestIsSetAsideAndRebuilt) {
  RunResult first = probe();
  ASSERT_EQ(first.exit_code, 0) << first.err;
  std::string manifest = fs::path(field(first.out, "path")).parent_path().string() + "/manifest.json";
  { std::ofstream(manifest, std::ios::trunc) << "{\"format\": 1, \"name\": "; }
  RunResult second = probe();
  ASSERT_EQ(second.exit_code, 0) << second.out << second.err;
  EXPECT_EQ(field(second.out, "origin"), "jit-built");
  EXPECT_THAT(second.err, HasSubstr("manifest.json is malformed"));
  EXPECT_EQ(entries_starting_with(".corrupt-"), 1);
  EXPECT_EQ(field(probe().out, "origin"), "jit-cache");
}

TEST_F(JitProcesses, WarmHitStartsNoSubprocess) {
  ASSERT_EQ(probe().exit_code, 0);
  std::size_t calls = count_lines_with(log(), "");
  RunResult warm = probe();
  ASSERT_EQ(warm.exit_code, 0) << warm.err;
  EXPECT_EQ(field(warm.out, "origin"), "jit-cache");
  EXPECT_EQ(static_cast<std::size_t>(count_lines_with(log(), "")), calls)
      << "neither the compiler nor its --version ran:\n" << log();
}

TEST_F(JitProcesses, ABuildSaysOnStderrWhenItStartsAndWhenItEnds) {
  RunResult built = probe();
  ASSERT_EQ(built.exit_code, 0) << built.err;
  std::string key = field(built.out, "key");
  EXPECT_EQ(count_lines_with(built.err, "mate: building module 'mate_sample_axpy_f32_t64' (key " + key +
                                            ") with 1 source ..."),
            1)
      << built.err;
  EXPECT_EQ(count_lines_with(built.err, "mate: module 'mate_sample_axpy_f32_t64' (key " + key + ") done in "), 1)
      << built.err;
  RunResult warm = probe();
  ASSERT_EQ(warm.exit_code, 0) << warm.err;
  EXPECT_EQ(warm.err, "") << "a cache hit builds nothing and says nothing";
}

TEST_F(JitProcesses, VerboseStreamsNinjaCommandLines) {
  RunResult r = probe({{"MATE_JIT_VERBOSE", "1"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("mate: building module 'mate_sample_axpy_f32_t64'"));
  EXPECT_THAT(r.err, HasSubstr(cxx + " -std=c++17")) << "ninja -v prints each full command";
}

// Under `mate guard-run` the program is guarded, not the compilers its JIT builds start (they
// would be slow and reach the mapping limit); the user's own LD_PRELOAD still reaches them.
TEST_F(JitProcesses, BuildToolsUnderGuardRunAreNotGuarded) {
  if (mate::testing::kSanitizerBuild) GTEST_SKIP() << "mate guard-run's preload library cannot run under a sanitizer";
  auto r = run({MATE_BINARY, "guard-run", "--", JIT_PROBE}, with_env(env({{"LD_PRELOAD", "libm.so.6"}})));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("origin=jit-built"));
  EXPECT_THAT(r.out, HasSubstr("result=ok"));
  const std::string seen = read_file(dir.path + "/cxx.env");
  std::istringstream lines(seen);
  int tools = 0;
  for (std::string line; std::getline(lines, line); ++tools) EXPECT_EQ(line, "LD_PRELOAD=libm.so.6 AUTO_INSTALL=");
  EXPECT_GE(tools, 2) << seen;  // --version, compile, link
}

TEST_F(JitProcesses, MateFindsTheBuildTreeAotModulesNextToItsBinary) {
  std::string aot = fs::path(MATE_BINARY).parent_path().parent_path().string() + "/aot/manifest.json";
  if (!fs::exists(aot)) GTEST_SKIP() << "configured with MATE_BUILD_AOT=OFF";
  RunResult r = run({MATE_BINARY, "module-status", "--filter", "aot"}, with_env({{"MATE_WORKSPACE_BASE", workspace}}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("mate_sample_axpy_f32_t64"));
  EXPECT_THAT(r.out, HasSubstr(fs::path(aot).parent_path().string()));
}

// module-status only reads: a mistyped workspace is not created, and one that cannot hold a
// cache (a file) is said, before a JIT build fails on it.
TEST_F(JitProcesses, ModuleStatusCreatesNothingAndSaysWhenTheCacheCannotBeWritten) {
  const std::string typo = workspace + "/no/such/base";
  RunResult r = run({MATE_BINARY, "module-status"}, with_env({{"MATE_WORKSPACE_BASE", typo}}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(fs::exists(workspace + "/no"));
  EXPECT_THAT(r.out, Not(HasSubstr("unusable")));
  fs::create_directories(workspace);
  { std::ofstream(workspace + "/a_file") << "x"; }
  r = run({MATE_BINARY, "module-status"}, with_env({{"MATE_WORKSPACE_BASE", workspace + "/a_file"}}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("unusable: " + workspace + "/a_file is not a directory: JIT builds cannot write the cache"));
  r = run({MATE_BINARY, "module-status", "--json"}, with_env({{"MATE_WORKSPACE_BASE", workspace + "/a_file"}}));
  EXPECT_THAT(nlohmann::json::parse(r.out)["summary"]["cache_problem"].get<std::string>(), HasSubstr("is not a directory"));
}

TEST_F(JitProcesses, ClearCacheLeavesAFileWhereTheCacheWouldBe) {
  fs::create_directories(workspace + "/.cache");
  { std::ofstream(workspace + "/.cache/mate") << "not mine"; }
  RunResult r = run({MATE_BINARY, "clear-cache", "--all-versions"}, with_env({{"MATE_WORKSPACE_BASE", workspace}}));
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_THAT(r.err, HasSubstr(workspace + "/.cache/mate is not a directory, so not a MATE cache: left as it is"));
  EXPECT_EQ(read_file(workspace + "/.cache/mate"), "not mine");
}

TEST_F(JitProcesses, DisableJitWithoutAotFailsNamingTheModule) {
  RunResult r = probe({{"MATE_DISABLE_JIT", "1"}});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("module 'mate_sample_axpy_f32_t64' is missing: MATE_DISABLE_JIT=1"));
  EXPECT_THAT(r.err, HasSubstr("searched:"));
  EXPECT_EQ(compiles(), 0);
}

TEST_F(JitProcesses, ModuleStatusListsKnownModulesOfflineAndClearCacheRemovesTheCache) {
  // Extra flags keep the build tree's AOT modules from matching, so the JIT state shows.
  auto e = env({{"MATE_EXTRA_CFLAGS", "-DSTATUS_TEST"}, {"MATE_MUSA_ARCH_LIST", "3.1"}});
  RunResult status = run({MATE_BINARY, "module-status"}, with_env(e));
  ASSERT_EQ(status.exit_code, 0) << status.err;
  EXPECT_THAT(status.out, HasSubstr("mate_sample_axpy_f32_t64"));
  EXPECT_THAT(status.out, HasSubstr("mate_sample_scale_cuda"));
  EXPECT_THAT(status.out, HasSubstr("missing"));
  EXPECT_THAT(status.out, HasSubstr("MUSA 3.1"));
  EXPECT_THAT(status.out, HasSubstr("JIT: enabled"));

  ASSERT_EQ(probe({{"MATE_EXTRA_CFLAGS", "-DSTATUS_TEST"}}).exit_code, 0);
  RunResult jit = run({MATE_BINARY, "module-status", "--filter", "jit", "--json", "--detailed"}, with_env(e));
  ASSERT_EQ(jit.exit_code, 0) << jit.err;
  auto j = nlohmann::json::parse(jit.out);
  ASSERT_EQ(j["modules"].size(), 1u) << jit.out;
  EXPECT_EQ(j["modules"][0]["name"], "mate_sample_axpy_f32_t64");
  EXPECT_EQ(j["modules"][0]["status"], "jit-cached");
  EXPECT_GT(j["modules"][0]["size"].get<int>(), 0);
  EXPECT_FALSE(j["modules"][0]["inputs"].empty());
  EXPECT_EQ(j["summary"]["musa_arch_list"], "3.1");
  EXPECT_EQ(j["summary"]["jit_enabled"], true);

  RunResult stale = run({MATE_BINARY, "module-status", "--filter", "stale"},
                        with_env(env({{"MATE_EXTRA_CFLAGS", "-DOTHER"}})));
  EXPECT_THAT(stale.out, HasSubstr("MATE_EXTRA_CFLAGS differs (cached: -DSTATUS_TEST; now: -DOTHER)"));

  EXPECT_EQ(run({MATE_BINARY, "module-status", "--filter", "bogus"}, with_env(e)).exit_code, 2);
  RunResult bad_arch = run({MATE_BINARY, "module-status"}, with_env({{"MATE_CUDA_ARCH_LIST", "sm_90"}}));
  EXPECT_EQ(bad_arch.exit_code, 2);
  EXPECT_THAT(bad_arch.err, HasSubstr("MATE_CUDA_ARCH_LIST"));
  RunResult unknown = run({MATE_BINARY, "aot-build", "--out", dir.path + "/aot", "--module", "nope"}, with_env(e));
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_THAT(unknown.err, HasSubstr("unknown module 'nope'"));
  // A module asked for by name that cannot be built here is a failure, not a skip.
  auto no_compiler = e;
  no_compiler["CXX"] = "/nonexistent/c++";
  RunResult skipped = run({MATE_BINARY, "aot-build", "--out", dir.path + "/aot", "--module", "mate_sample_axpy_f32_t64"},
                          with_env(no_compiler));
  EXPECT_EQ(skipped.exit_code, 1) << skipped.out << skipped.err;
  EXPECT_THAT(skipped.out, HasSubstr("skipped mate_sample_axpy_f32_t64"));
  EXPECT_THAT(skipped.err, HasSubstr("a module asked for with --module was not built"));
  { std::ofstream(dir.path + "/a_file") << "x"; }
  RunResult bad_out = run({MATE_BINARY, "aot-build", "--out", dir.path + "/a_file/aot"}, with_env(e));
  EXPECT_EQ(bad_out.exit_code, 2);
  EXPECT_THAT(bad_out.err, HasSubstr("--out " + dir.path + "/a_file/aot: cannot create the directory"));
  // --toolchain leaves the others out (the build's AOT step does so for an empty arch list).
  RunResult host_only = run({MATE_BINARY, "aot-build", "--out", dir.path + "/aot_host", "--toolchain", "host",
                             "--module", "mate_sample_axpy_f32_t64", "--module", "mate_sample_scale_cuda"}, with_env(e));
  EXPECT_EQ(host_only.exit_code, 0) << host_only.out << host_only.err;
  EXPECT_THAT(host_only.out, HasSubstr("built   mate_sample_axpy_f32_t64"));
  EXPECT_THAT(host_only.out, Not(HasSubstr("mate_sample_scale_cuda")));
  // ... but filters that leave nothing are a usage error, and no manifest is written.
  RunResult none_left = run({MATE_BINARY, "aot-build", "--out", dir.path + "/aot_none", "--toolchain", "cuda",
                             "--module", "mate_sample_axpy_f32_t64"}, with_env(e));
  EXPECT_EQ(none_left.exit_code, 2) << none_left.out << none_left.err;
  EXPECT_THAT(none_left.err, HasSubstr("no module left to build: none of --module mate_sample_axpy_f32_t64 is of "
                                       "--toolchain cuda"));
  EXPECT_FALSE(fs::exists(dir.path + "/aot_none"));
  // An --out whose manifest.json is not a MATE AOT index is not overwritten.
  fs::create_directories(dir.path + "/theirs");
  { std::ofstream(dir.path + "/theirs/manifest.json") << R"({"name": "their project"})"; }
  RunResult theirs = run({MATE_BINARY, "aot-build", "--out", dir.path + "/theirs", "--toolchain", "host"}, with_env(e));
  EXPECT_EQ(theirs.exit_code, 1) << theirs.out << theirs.err;
  EXPECT_THAT(theirs.err, HasSubstr(dir.path + "/theirs/manifest.json would be replaced, but it is not a MATE AOT "
                                    "index; left as it is"));
  EXPECT_THAT(theirs.out, Not(HasSubstr("built")));
  EXPECT_EQ(read_file(dir.path + "/theirs/manifest.json"), R"({"name": "their project"})");

  RunResult clear = run({MATE_BINARY, "clear-cache"}, with_env(e));
  EXPECT_EQ(clear.exit_code, 0) << clear.err;
  EXPECT_THAT(clear.out, HasSubstr("removed " + workspace + "/.cache/mate/" MATE_TEST_VERSION));
  EXPECT_FALSE(fs::exists(workspace + "/.cache/mate/" MATE_TEST_VERSION));
}

}  // namespace
