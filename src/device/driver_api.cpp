// Loading a vendor's driver library (its row in mate/device/vendors.hpp: sonames, symbol
// prefix) and resolving its entry points by prefix.
#include "device/driver_api.hpp"

#include <dlfcn.h>

#include <string>
#include <vector>

#include "mate/config.hpp"
#include "mate/device/vendors.hpp"

namespace mate::device::driver {

namespace {

bool resolve(Api* api, std::string* reason) {
#define MATE_DRIVER_RESOLVE(member, name, suffix, ret, params)                               \
  {                                                                                          \
    const std::string& symbol = api->symbols->entry[static_cast<int>(Call::member)];         \
    dlerror();                                                                               \
    void* address = dlsym(api->handle, symbol.c_str());                                      \
    if (address == nullptr && !optional_call(Call::member)) {                                \
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

const Symbols& symbols(Kind kind) {
  static const Symbols* const table = [] {
    auto* t = new Symbols[std::size(kVendors)];
    for (const Vendor& v : kVendors) {
      Symbols& s = t[kind_index(v.kind) - 1];
      const std::string p = v.symbol_prefix;
#define MATE_DRIVER_NAME(member, name, suffix, ret, params) \
  s.entry[static_cast<int>(Call::member)] = p + name + suffix;
      MATE_DRIVER_ENTRY_POINTS(MATE_DRIVER_NAME)
#undef MATE_DRIVER_NAME
      s.make_context_current =
          p + "CtxGetCurrent/" + p + "CtxSetCurrent (making the device's primary context current)";
    }
    return t;
  }();
  const Vendor* v = find_vendor(kind);
  return table[v != nullptr ? kind_index(kind) - 1 : 0];
}

const char* call_name(const Api& api, Call call) noexcept {
  return api.symbols != nullptr ? api.symbols->entry[static_cast<int>(call)].c_str() : "(no driver)";
}

bool load(Kind kind, Api* api, std::string* reason) {
  *api = Api{};
  const Vendor* vendor = find_vendor(kind);
  if (vendor == nullptr) {
    *reason = "no device driver serves host memory";
    return false;
  }
  api->kind = kind;
  api->symbols = &symbols(kind);
  std::vector<std::string> candidates;
  try {
    const std::string fake = config::fake_driver_path();
    if (!fake.empty()) candidates.push_back(fake);
  } catch (const config::ConfigError& e) {
    *reason = e.what();
    return false;
  }
  if (candidates.empty()) candidates.assign(vendor->driver_sonames.begin(), vendor->driver_sonames.end());
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
