// TempDir and read_file, the way tests use them.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <system_error>

#include "temp_dir.hpp"

namespace {

namespace fs = std::filesystem;
using mate::testing::read_file;
using mate::testing::TempDir;

TEST(TempDir, IsANewEmptyDirectoryRemovedWithItsContent) {
  std::string kept;
  {
    TempDir dir("mate_support_test");
    kept = dir.path;
    EXPECT_TRUE(fs::path(dir.path).is_absolute());
    EXPECT_EQ(fs::path(dir.path).filename().string().rfind("mate_support_test_", 0), 0u) << dir.path;
    ASSERT_TRUE(fs::is_directory(dir.path));
    EXPECT_TRUE(fs::is_empty(dir.path));
    fs::create_directories(dir / "sub" / "deeper");
    std::ofstream(dir / "sub" / "file.txt") << "content";
    EXPECT_EQ(read_file(dir / "sub" / "file.txt"), "content");
  }
  EXPECT_FALSE(fs::exists(kept)) << "removed with everything in it";
}

TEST(TempDir, EachIsDistinct) {
  TempDir a, b, c;
  EXPECT_EQ((std::set<std::string>{a.path, b.path, c.path}).size(), 3u);
}

TEST(TempDir, ImpossibleDirectoryIsAClearError) {
  try {
    TempDir dir("no_such_parent_dir/x");
    ADD_FAILURE() << "created " << dir.path;
  } catch (const std::system_error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot create temporary directory "), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("no_such_parent_dir/x_XXXXXX"), std::string::npos) << e.what();
  }
}

TEST(ReadFile, WholeFileBinarySafeAndEmptyWhenMissing) {
  TempDir dir;
  const std::string bytes("a\0b\r\nc", 6);
  std::ofstream(dir / "bin", std::ios::binary) << bytes;
  EXPECT_EQ(read_file(dir / "bin"), bytes);
  EXPECT_EQ(read_file(dir / "missing"), "");
}

}  // namespace
