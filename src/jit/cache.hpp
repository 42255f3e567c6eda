// The JIT cache on disk: where things live, manifests, validation of published entries.
//
//   <base>/.cache/mate/<version>/
//     toolchains/<stamp>.version                     compiler --version memos
//     <arch>/cached_ops/<name>/<key>/                a published entry (immutable but its stamp)
//         manifest.json  module.so  build.ninja  build.log  src/  include/  obj/
//         verified.json                              the library's verified stamp (verify.hpp)
//     aot-verified/<hash of path>.json               AOT modules' verified stamps
//     <arch>/cached_ops/<name>/.lock-<key>           flock serialising builders of <key>
//     <arch>/cached_ops/<name>/.staging-<key>-...    a private build directory
//     <arch>/cached_ops/<name>/.corrupt-<key>-...    an entry set aside as unusable
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "jit/plan.hpp"

namespace mate::jit::detail {

class CheckedLibrary;  // verify.hpp

// How a library check (verify.hpp, check_library) uses the verified stamp.
struct CheckOptions {
  bool trust_stamp = true;  // false: hash whatever the stamp says (module-status --verify, error paths)
  bool write_stamp = true;  // false: write no stamp (a status query creates nothing)
};

// <base>/.cache/mate/<version>; base is MATE_WORKSPACE_BASE, else HOME, else the password
// database's home directory.
std::string cache_root();
std::string workspace_base();
std::string module_dir(const std::string& root, const Plan& plan);  // .../cached_ops/<name>
std::string entry_dir(const std::string& root, const Plan& plan);   // .../<name>/<key>

struct Manifest {
  std::string name, key, toolchain, arch, library, built_at;
  std::vector<std::string> arch_list;
  std::vector<KeyInput> inputs;
  double build_seconds = 0;
  std::uint64_t size = 0;
  // XXH3-128 of the library's bytes (32 hex digits), recorded when the entry is published and
  // checked before every dlopen (verify.hpp): a damaged library is set aside, never loaded.
  std::string library_hash;
};

nlohmann::json to_json(const Manifest& m);
Manifest manifest_for(const Plan& plan);
// Reads <dir>/manifest.json; nullopt with `why` when missing or malformed.
std::optional<Manifest> read_manifest(const std::string& dir, std::string* why);
// Checks a published entry against the plan: manifest readable, same name and key, and the
// library sound (check_library, with the entry's stamp). Returns "" when usable, else the
// reason; `library`, when given, gets the checked library, open. The loader and `mate
// module-status` both judge entries by it, so status shows what a load would do.
std::string check_entry(const std::string& dir, const Plan& plan, Manifest* out, const CheckOptions& options = {},
                        CheckedLibrary* library = nullptr);

// Total bytes of regular files under `dir` (0 when missing).
std::uint64_t directory_size(const std::string& dir);
// Removes `dir` recursively; ignores errors (best effort, for discarded builds).
void remove_tree(const std::string& dir) noexcept;
// mkdir -p with mode 0755 for every directory it creates, whatever the umask; throws
// ModuleError(CacheError) naming the directory.
void make_directories(const std::string& dir);
std::string hostname();

}  // namespace mate::jit::detail
