// mate.memory_debug's calls into the guard (python/mate/memory_debug.py holds the config class
// and the framework side: PyTorch's pluggable allocator over libmate_guard_hooks.so, which links
// this same libmate.so, so both see one guard).
#include <pybind11/stl.h>

#include <algorithm>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "mate/core/install_location.hpp"
#include "mate/device/vendors.hpp"
#include "mate/guard/allocator.hpp"

namespace py = pybind11;

namespace mate::python {

namespace {

device::Kind kind_named(const std::string& name) {
  if (name == "host") return device::Kind::Host;
  if (const device::Vendor* v = device::find_vendor(std::string_view(name))) return v->kind;
  throw py::value_error("unknown memory kind \"" + name + "\": accepted are host, cuda and musa");
}

py::object config_dict(const guard::GuardAllocatorConfig& c) {
  py::dict d;
  d["mode"] = guard::to_string(c.mode);
  d["sync_on_free"] = c.sync_on_free;
  d["log_allocations"] = c.log_allocations;
  return d;
}

const char* relation_name(guard::Relation r) {
  switch (r) {
    case guard::Relation::Inside: return "inside";
    case guard::Relation::BeforeStart: return "before_start";
    case guard::Relation::PastEnd: return "past_end";
  }
  return "?";
}

const char* state_name(guard::State s) {
  switch (s) {
    case guard::State::None: return "none";
    case guard::State::Live: return "live";
    case guard::State::Quarantined: return "freed";
  }
  return "?";
}

}  // namespace

void add_memory_debug(py::module_& m) {
  py::register_exception<guard::GuardError>(m, "GuardError", PyExc_RuntimeError);
  m.def(
      "install_guard_allocator",
      [](const std::string& kind, const std::string& mode, bool sync_on_free, bool log_allocations) {
        guard::GuardAllocatorConfig c;
        c.backend = kind_named(kind);
        c.mode = mode == "head" ? guard::Mode::Head : guard::Mode::Tail;
        c.sync_on_free = sync_on_free;
        c.log_allocations = log_allocations;
        guard::install_guard_allocator(c);
      },
      py::arg("kind"), py::arg("mode"), py::arg("sync_on_free"), py::arg("log_allocations"),
      "Installs the process-wide guarded allocator for `kind` (GuardError if another config is installed)");
  m.def(
      "installed_config",
      [](const std::string& kind) -> py::object {
        guard::GuardAllocator* g = guard::installed_guard_allocator(kind_named(kind));
        return g == nullptr ? py::none() : config_dict(g->config());
      },
      py::arg("kind"));
  m.def(
      "check_all",
      [] {
        std::size_t bad = 0;
        if (guard::GuardAllocator* g = guard::installed_guard_allocator(device::Kind::Host)) bad += g->check_all();
        for (const device::Vendor& v : device::vendors()) {
          // Every device ordinal's (the pluggable hooks make one per device), device 0's once.
          std::vector<guard::GuardAllocator*> all = guard::device_guard_allocators(v.kind);
          guard::GuardAllocator* installed = guard::installed_guard_allocator(v.kind);
          if (installed != nullptr && std::find(all.begin(), all.end(), installed) == all.end()) all.push_back(installed);
          for (guard::GuardAllocator* g : all) bad += g->check_all();
        }
        return bad;
      },
      "Checks the canaries of every live guarded allocation (host, and each device's); returns how many are not known intact");
  m.def(
      "describe",
      [](std::uintptr_t address) -> py::object {
        const guard::Description d = guard::describe(address);
        if (!d.found) return py::none();
        py::dict out;
        out["id"] = d.id;
        out["address"] = d.user;
        out["size"] = d.size;
        out["state"] = state_name(d.state);
        out["relation"] = relation_name(d.relation);
        out["offset"] = d.offset;
        out["mode"] = guard::to_string(d.mode);
        return out;
      },
      py::arg("address"), "The guarded allocation `address` belongs to or is nearest, or None");
  m.def("hooks_library", [] { return core::code_directory() + "/libmate_guard_hooks.so"; });
}

}  // namespace mate::python
