// dladdr on a function of this file names the module it was loaded from. For the main program
// dladdr gives argv[0]'s spelling (maybe relative), so /proc/self/exe is read then instead.
#include "mate/core/install_location.hpp"

#include <dlfcn.h>

#include <filesystem>

namespace mate::core {

namespace {

bool in_main_program(const Dl_info& info) {
  Dl_info main_info{};
  void* main_handle = ::dlopen(nullptr, RTLD_LAZY | RTLD_NOLOAD);
  if (main_handle == nullptr) return false;
  void* main_symbol = ::dlsym(main_handle, "main");
  ::dlclose(main_handle);
  return main_symbol != nullptr && ::dladdr(main_symbol, &main_info) != 0 && main_info.dli_fbase == info.dli_fbase;
}

}  // namespace

std::string code_directory() {
  namespace fs = std::filesystem;
  Dl_info info{};
  std::error_code ec;
  fs::path file;
  if (::dladdr(reinterpret_cast<void*>(&code_directory), &info) != 0 && info.dli_fname != nullptr &&
      info.dli_fname[0] != '\0' && !in_main_program(info)) {
    file = fs::canonical(info.dli_fname, ec);
  }
  if (file.empty()) file = fs::read_symlink("/proc/self/exe", ec);
  if (ec || file.empty()) return "";
  return file.parent_path().string();
}

std::string install_tree() {
  const std::string dir = code_directory();
  if (dir.empty()) return "";
  std::error_code ec;
  const std::filesystem::path up = std::filesystem::weakly_canonical(std::filesystem::path(dir) / "..", ec);
  return ec ? "" : up.string();
}

}  // namespace mate::core
