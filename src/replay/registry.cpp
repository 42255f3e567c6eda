#include "mate/replay/registry.hpp"

#include <map>
#include <mutex>

namespace mate::replay {

namespace {

struct Registry {
  std::mutex mutex;
  std::map<std::string, Replayable, std::less<>> functions;
  PythonResolver python_resolver;  // set before replaying, not while
};

// Never destroyed; function-local so that registrations from any static initializer (or a
// library loaded later) find it constructed.
Registry& registry() {
  static Registry* r = new Registry();
  return *r;
}

}  // namespace

const char* to_string(ParamKind k) noexcept {
  switch (k) {
    case ParamKind::InputTensor: return "const DLTensor*";
    case ParamKind::WritableTensor: return "DLTensor*";
    case ParamKind::Bool: return "bool";
    case ParamKind::Int: return "signed integer";
    case ParamKind::UInt: return "unsigned integer";
    case ParamKind::Enum: return "enum";
    case ParamKind::Float: return "floating point";
    case ParamKind::String: return "string";
    case ParamKind::Value: return "any value";
  }
  return "?";
}

void register_function(Replayable r) {
  Registry& reg = registry();
  std::lock_guard lock(reg.mutex);
  std::string name = r.name;
  reg.functions.insert_or_assign(std::move(name), std::move(r));
}

const Replayable* find_function(std::string_view name) {
  Registry& reg = registry();
  std::lock_guard lock(reg.mutex);
  auto it = reg.functions.find(name);
  return it == reg.functions.end() ? nullptr : &it->second;  // std::map nodes are stable
}

std::vector<std::string> registered_functions() {
  Registry& reg = registry();
  std::lock_guard lock(reg.mutex);
  std::vector<std::string> out;
  for (const auto& [name, r] : reg.functions) out.push_back(name);
  return out;
}

void unregister_function(std::string_view name) {
  Registry& reg = registry();
  std::lock_guard lock(reg.mutex);
  if (auto it = reg.functions.find(name); it != reg.functions.end()) reg.functions.erase(it);
}

void set_python_resolver(PythonResolver resolver) {
  Registry& reg = registry();
  std::lock_guard lock(reg.mutex);
  reg.python_resolver = std::move(resolver);
}

const PythonResolver& python_resolver() { return registry().python_resolver; }

}  // namespace mate::replay
