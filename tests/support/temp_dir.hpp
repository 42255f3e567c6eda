// Files for tests: a private temporary directory that is removed with everything in it when the
// test is done, and a whole file read back as text.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace mate::testing {

// A new, empty directory under the system's temporary directory ($TMPDIR, else /tmp), named
// <prefix>_XXXXXX with a unique suffix (mkdtemp), so concurrent test processes never share one.
// Throws std::system_error naming the directory when it cannot be created.
class TempDir {
 public:
  explicit TempDir(std::string_view prefix = "mate_test");
  ~TempDir();  // removes the tree; errors are ignored (nothing to report them to)
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string path;  // absolute

  std::filesystem::path operator/(std::string_view name) const { return std::filesystem::path(path) / name; }
};

// The whole content of `path`; "" when it cannot be read (the test's expectations then fail).
std::string read_file(const std::filesystem::path& path);

}  // namespace mate::testing
