// Uses each carried package once, with a result checked by a GoogleTest/gMock test, so that a
// missing header, library or runtime dependency of the carry shows up as a failed test here.
#include <CLI/CLI.hpp>
#include <dlpack/dlpack.h>
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#define XXH_INLINE_ALL  // MATE uses xxhash header-only
#include <xxhash.h>

#include <string>
#include <vector>

TEST(Carry, FmtFormatsThroughTheSharedLibrary) { EXPECT_EQ(fmt::format("{:>5}|{:x}", 42, 255), "   42|ff"); }

TEST(Carry, NlohmannJsonRoundTrips) {
  auto j = nlohmann::json::parse(R"({"shape": [2, 3], "dtype": "f32"})");
  EXPECT_EQ(j["shape"][1].get<int>(), 3);
  EXPECT_EQ(j.dump(), R"({"dtype":"f32","shape":[2,3]})");
}

TEST(Carry, Cli11ParsesOptions) {
  CLI::App app{"carry"};
  std::string mode = "tail";
  app.add_option("--mode", mode)->check(CLI::IsMember({"tail", "head"}));
  std::vector<std::string> args = {"head", "--mode"};  // reversed, as CLI11 expects
  app.parse(args);
  EXPECT_EQ(mode, "head");
}

TEST(Carry, DlpackDeclaresTheDeviceCodes) {
  EXPECT_EQ(kDLCUDA, 2);
  DLTensor t{};
  EXPECT_EQ(t.ndim, 0);
}

TEST(Carry, XxhashHashesKnownInput) { EXPECT_EQ(XXH64("", 0, 0), 0xEF46DB3751D8E999ULL); }

TEST(Carry, GMockMatchersWork) {
  const std::vector<int> values{1, 2, 3};
  EXPECT_THAT(values, testing::ElementsAre(1, 2, 3));
}
