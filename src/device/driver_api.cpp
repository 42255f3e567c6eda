// Loading a CUDA or MUSA driver library and resolving its entry points by prefix.
#include "device/driver_api.hpp"

#include <dlfcn.h>

#include <iterator>
#include <string>
#include <vector>

#include "mate/config.hpp"

namespace mate::device::driver {

namespace {

// The vendor libraries, in the order they are tried. libcuda.so.1 is the driver's soname (the
// unversioned libcuda.so is a development symlink, or a link-time stub in the toolkit that
// must never be loaded); MUSA installs libmusa.so.1 and, on some systems, only libmusa.so.
const char* const kCudaLibraries[] = {"libcuda.so.1"};
const char* const kMusaLibraries[] = {"libmusa.so.1", "libmusa.so"};

bool resolve(Api* api, std::string* reason) {
  const std::string p = prefix(api->kind);
#define MATE_DRIVER_RESOLVE(member, name, suffix, ret, params)                               \
  {                                                                                          \
    const std::string symbol = p + name + suffix;                                            \
    dlerror();                                                                               \
    void* address = dlsym(api->handle, symbol.c_str());                                      \
    if (address == nullptr) {                                                                \
      *reason = api->library + ": missing entry point " + symbol +                           \
                " (a driver too old for the virtual-memory API, or not a " +                 \
                kind_name(api->kind) + " driver)";                                           \
      return false;                                                                          \
    }                                                                                        \
    api->member = reinterpret_cast<ret(*) params>(address);                                  \
  }
  MATE_DRIVER_ENTRY_POINTS(MATE_DRIVER_RESOLVE)
#undef MATE_DRIVER_RESOLVE
  return true;
}

}  // namespace

const char* prefix(Kind kind) noexcept { return kind == Kind::Musa ? "mu" : "cu"; }
const char* kind_name(Kind kind) noexcept { return kind == Kind::Musa ? "musa" : "cuda"; }

bool load(Kind kind, Api* api, std::string* reason) {
  *api = Api{};
  api->kind = kind;
  std::vector<std::string> candidates;
  try {
    const std::string fake = config::fake_driver_path();
    if (!fake.empty()) candidates.push_back(fake);
  } catch (const config::ConfigError& e) {
    *reason = e.what();
    return false;
  }
  if (candidates.empty()) {
    if (kind == Kind::Musa)
      candidates.assign(std::begin(kMusaLibraries), std::end(kMusaLibraries));
    else
      candidates.assign(std::begin(kCudaLibraries), std::end(kCudaLibraries));
  }
  std::string tried;
  for (const std::string& library : candidates) {
    // RTLD_LOCAL: the driver's symbols must not satisfy other libraries' lookups.
    void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* error = dlerror();
      if (!tried.empty()) tried += "; ";
      tried += error != nullptr ? error : library + ": dlopen failed";
      continue;
    }
    api->handle = handle;
    api->library = library;
    return resolve(api, reason);
  }
  *reason = tried;
  return false;
}

const char* error_name(const Api& api, Result result) noexcept {
  const char* text = nullptr;
  if (api.GetErrorName == nullptr || api.GetErrorName(result, &text) != kSuccess ||
      text == nullptr)
    return "unknown error code";
  return text;
}

const char* error_string(const Api& api, Result result) noexcept {
  const char* text = nullptr;
  if (api.GetErrorString == nullptr || api.GetErrorString(result, &text) != kSuccess ||
      text == nullptr)
    return "no description from the driver";
  return text;
}

std::string describe_result(const Api& api, const char* call, Result result) {
  return std::string(call) + ": " + error_name(api, result) + " (" + error_string(api, result) +
         ", code " + std::to_string(result) + ")";
}

}  // namespace mate::device::driver
