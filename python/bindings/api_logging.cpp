// The decorator's side of a logged call (python/mate/api_logging.py): the same begin_call /
// end_call the C++ MATE_API uses, so records, sink, dumps and crash context are the C++ ones.
#include <pybind11/stl.h>

#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "bindings.hpp"
#include "mate/config.hpp"
#include "mate/dump/dump.hpp"
#include "mate/log/api.hpp"
#include "mate/log/arg_json.hpp"
#include "python_values.hpp"

namespace py = pybind11;

namespace mate::python {

namespace {

// The C++ log keeps function names as pointers (the crash context): Python's are kept here for
// the life of the process, one copy each.
const char* lasting_name(const std::string& name) {
  static std::mutex mutex;
  static auto* names = new std::unordered_set<std::string>();
  std::lock_guard lock(mutex);
  return names->insert(name).first->c_str();
}

// One call in progress: what begin_call returned.
class Call {
 public:
  explicit Call(log::detail::CallState* state) : state_(state) {}
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;
  ~Call() {
    if (state_ != nullptr) log::detail::end_call(state_);  // end() never ran: finish the record
  }

  void finish(py::object outputs, py::object exception_type, py::object exception_message) {
    if (state_ == nullptr) throw std::runtime_error("this call has already been finished");
    if (!exception_type.is_none()) {
      log::detail::record_exception_named(state_, exception_type.cast<std::string>(), exception_message.cast<std::string>());
    } else if (!outputs.is_none() && log::level() >= 3) {
      auto args = std::make_shared<std::vector<log::Arg>>();
      for (py::handle pair : outputs) {
        py::tuple t = pair.cast<py::tuple>();
        args->push_back(to_arg(t[1], t[0].cast<std::string>()));
      }
      log::detail::set_output_collector(state_, [args](log::ArgList& list) {
        for (log::Arg& a : *args) list.push_back(std::move(a));
      });
    }
    log::detail::CallState* s = state_;
    state_ = nullptr;
    log::detail::end_call(s);
  }

 private:
  log::detail::CallState* state_;
};

// The logging and dumping variables are latched (read once per process). Reading them again
// means overriding each with the environment's current text (config::ScopedOverride), the
// previous overrides undone first, newest first, as they nest.
void reread_logging_variables() {
  static auto* overrides = new std::vector<std::unique_ptr<config::ScopedOverride>>();
  while (!overrides->empty()) overrides->pop_back();
  for (const config::VarInfo& v : config::all_variables()) {
    const std::string_view name = v.name;
    if (!name.starts_with("MATE_LOG") && !name.starts_with("MATE_DUMP_")) continue;
    const char* text = std::getenv(std::string(name).c_str());
    overrides->push_back(std::make_unique<config::ScopedOverride>(
        v.id, text != nullptr ? std::optional<std::string>(text) : std::nullopt));
  }
  log::reconfigure();
  dump::reconfigure();
}

struct Inputs {
  const py::sequence* names;
  const py::sequence* values;
};

}  // namespace

void add_api_logging(py::module_& m) {
  m.def("log_level", &log::level, "MATE_LOGLEVEL as read (the first call reads the registry)");
  m.def("reconfigure", &reread_logging_variables,
        "Reads MATE_LOGLEVEL, MATE_LOGDEST, MATE_LOGFORMAT and the MATE_DUMP_* variables from the environment again");

  py::class_<Call>(m, "Call").def("finish", &Call::finish, py::arg("outputs"), py::arg("exception_type"),
                                  py::arg("exception_message"));

  m.def(
      "begin_call",
      [](const std::string& name, const py::sequence& names, const py::sequence& values, const std::string& python_function,
         const std::string& script, std::uintptr_t stream) -> py::object {
        const log::PythonOrigin origin{python_function, script};
        Inputs inputs{&names, &values};
        log::detail::CallState* state = log::detail::begin_call(
            lasting_name(name),
            [](void* context, log::ArgList& list) {
              const auto* in = static_cast<const Inputs*>(context);
              const std::size_t n = in->names->size();
              for (std::size_t i = 0; i < n; ++i)
                list.push_back(to_arg((*in->values)[i], (*in->names)[i].cast<std::string>()));
            },
            &inputs, &origin, reinterpret_cast<void*>(stream));
        if (state == nullptr) return py::none();
        return py::cast(std::make_unique<Call>(state));
      },
      py::arg("name"), py::arg("names"), py::arg("values"), py::arg("python_function"), py::arg("script"),
      py::arg("stream") = 0,
      "Logs a call's inputs (level 3+) before its body runs; None when not logging");

  m.def(
      "describe_argument", [](py::handle value) { return log::arg_to_json(to_arg(value, "value")).dump(); },
      "The JSON object a value is logged as (for tests and debugging)");
}

}  // namespace mate::python
