#include "temp_dir.hpp"

#include <stdlib.h>

#include <cerrno>
#include <fstream>
#include <sstream>
#include <system_error>

namespace mate::testing {

namespace {

std::string make_temp_dir(std::string_view prefix) {
  const std::string pattern = (std::filesystem::temp_directory_path() / prefix).string() + "_XXXXXX";
  std::string path = pattern;  // mkdtemp fills in the X's, even when it fails
  if (::mkdtemp(path.data()) == nullptr)
    throw std::system_error(errno, std::generic_category(), "cannot create temporary directory " + pattern);
  return path;
}

}  // namespace

TempDir::TempDir(std::string_view prefix) : path(make_temp_dir(prefix)) {}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace mate::testing
