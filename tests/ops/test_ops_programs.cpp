// The reference kernels as a user meets them: `mate module-status` lists them (registered by the
// mate program), and examples/ops_demo runs, checks its results and logs its calls at level 3.
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "mate/dump/tensor_file.hpp"
#include "subprocess.hpp"
#include "temp_dir.hpp"

namespace {

using mate::testing::run;
using mate::testing::RunOptions;
using mate::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(OpsPrograms, ModuleStatusListsEveryReferenceModule) {
  TempDir ws;
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
  TempDir ws;
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

// Level 10 on the demo dumps every ops call; `mate replay` (with the reference kernels built in)
// runs each again and compares its outputs: all pass. Changing a recorded input's output proves
// the comparison can fail.
TEST(OpsPrograms, DemoDumpsAtLevel10AndMateReplayPassesThenCatchesAChangedOutput) {
  TempDir ws;
  std::string dumps = ws.path + "/dumps";
  RunOptions options{{{"MATE_WORKSPACE_BASE", ws.path}, {"MATE_LOGLEVEL", "10"}, {"MATE_LOGDEST", ws.path + "/log.txt"},
                      {"MATE_DUMP_DIR", dumps}},
                     std::nullopt, std::nullopt};
  auto demo = run({OPS_DEMO}, options);
  ASSERT_EQ(demo.exit_code, 0) << demo.out << demo.err;

  auto replay = run({MATE_BINARY, "replay", "--dir", dumps}, RunOptions{{{"MATE_WORKSPACE_BASE", ws.path}}, {}, {}});
  EXPECT_EQ(replay.exit_code, 0) << replay.out << replay.err;
  EXPECT_THAT(replay.out, HasSubstr("ops.gemm_nt"));
  EXPECT_THAT(replay.out, HasSubstr("ops.rmsnorm"));
  EXPECT_THAT(replay.out, HasSubstr("ops.m_grouped_gemm_nt_contiguous"));
  EXPECT_THAT(replay.out, HasSubstr("\n4 passed, 0 failed\n")) << "the demo makes 4 calls";

  // Flip the recorded result of the first rmsnorm call: replay must now report a mismatch.
  std::string rms_dir;
  for (const auto& e : std::filesystem::directory_iterator(dumps))
    if (e.path().filename().string().find("ops.rmsnorm") != std::string::npos &&
        (rms_dir.empty() || e.path().string() < rms_dir))
      rms_dir = e.path().string();
  ASSERT_FALSE(rms_dir.empty());
  std::string out_file;
  for (const auto& e : std::filesystem::directory_iterator(rms_dir + "/outputs")) out_file = e.path().string();
  ASSERT_FALSE(out_file.empty());
  {
    // As a user would with torch.load / torch.save: read the tensor, change it, save it again
    // (flipping bytes in place would only break the file's CRC-32).
    mate::dump::TensorRecord r = mate::dump::read_torch_save(out_file);
    ASSERT_GE(r.data.size(), 2u);
    r.data.back() ^= 0x40;  // the high byte of the last element: a large change in any dtype
    std::filesystem::remove(out_file);
    const DLTensor t = r.view_over(reinterpret_cast<std::uintptr_t>(r.data.data()));
    ASSERT_TRUE(mate::dump::write_torch_save(out_file, mate::tensor::TensorView(t)).ok());
  }
  auto changed = run({MATE_BINARY, "replay", "--dir", rms_dir}, RunOptions{{{"MATE_WORKSPACE_BASE", ws.path}}, {}, {}});
  EXPECT_EQ(changed.exit_code, 1) << changed.out << changed.err;
  EXPECT_THAT(changed.out, HasSubstr("mismatch"));
  EXPECT_THAT(changed.out, HasSubstr("0 passed, 1 failed"));
}

}  // namespace
