// The reference kernels as a user meets them: `mate module-status` lists them (registered by the
// mate program), and examples/ops_demo runs, checks its results and logs its calls at level 3.
#include <filesystem>
#include <set>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "subprocess.hpp"

namespace {

using mate::testing::run;
using mate::testing::RunOptions;
using ::testing::HasSubstr;
using ::testing::Not;

struct ScratchDir {
  std::string path;
  ScratchDir() {
    char tmpl[] = "/tmp/mate_ops_programs_XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

TEST(OpsPrograms, ModuleStatusListsEveryReferenceModule) {
  ScratchDir ws;
  auto r = run({MATE_BINARY, "module-status", "--json"},
               RunOptions{{{"MATE_WORKSPACE_BASE", ws.path}, {"MATE_CUDA_ARCH_LIST", "9.0"}}, std::nullopt, std::nullopt});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  std::set<std::string> names;
  for (const auto& m : doc["modules"])
    if (m["library"] == "mate.ops") names.insert(m["name"].get<std::string>() + " " + m["toolchain"].get<std::string>());
  std::set<std::string> expected;
  for (std::string kernel : {"gemm_nt", "rmsnorm", "grouped_gemm_nt"})
    for (std::string type : {"f32", "bf16"}) {
      expected.insert("mate_ops_" + kernel + "_" + type + " host");
      expected.insert("mate_ops_" + kernel + "_" + type + "_cuda cuda");
    }
  EXPECT_EQ(names, expected);
}

TEST(OpsPrograms, DemoRunsChecksItsResultsAndLogsAtLevel3) {
  ScratchDir ws;
  // MATE_EXTRA_CFLAGS changes the module keys, so the build tree's AOT modules do not match and
  // the first run builds through the JIT; the second finds the JIT cache.
  RunOptions options{{{"MATE_WORKSPACE_BASE", ws.path}, {"MATE_EXTRA_CFLAGS", "-O1"}}, std::nullopt, std::nullopt};
  auto first = run({OPS_DEMO}, options);
  ASSERT_EQ(first.exit_code, 0) << first.out << first.err;
  EXPECT_THAT(first.out, HasSubstr("[mate_ops_gemm_nt_f32: built now]"));
  EXPECT_THAT(first.out, HasSubstr("all results match"));
  auto second = run({OPS_DEMO}, options);
  ASSERT_EQ(second.exit_code, 0) << second.out << second.err;
  EXPECT_THAT(second.out, HasSubstr("[mate_ops_gemm_nt_f32: JIT cache]"));
  EXPECT_THAT(second.out, Not(HasSubstr("built now")));

  options.env["MATE_LOGLEVEL"] = "3";
  auto logged = run({OPS_DEMO}, options);
  ASSERT_EQ(logged.exit_code, 0) << logged.out << logged.err;
  EXPECT_THAT(logged.out, HasSubstr("] ops.gemm_nt inputs\n  a: tensor f32 [64, 128] strides [128, 1] cpu contiguous"));
  EXPECT_THAT(logged.out, HasSubstr("] ops.m_grouped_gemm_nt_contiguous outputs ("));
  EXPECT_THAT(logged.out, HasSubstr("  m_indices: tensor i32 [384] strides [1] cpu contiguous"));
}

}  // namespace
