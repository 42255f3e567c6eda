// `mate` in the interpreter's process (python -m mate), the registry as Python sees it, and
// where MATE's files are (found from libmate.so, not /proc/self/exe, which is python).
#include <pybind11/stl.h>

#include <cstdio>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "config/env_report.hpp"
#include "mate/cli/program.hpp"
#include "mate/config.hpp"
#include "mate/core/install_location.hpp"
#include "mate/core/test_shard.hpp"

namespace py = pybind11;

namespace mate::python {

void add_program(py::module_& m) {
  m.def(
      "run_program",
      [](const std::vector<std::string>& args) {
        std::fflush(stdout);
        const int status = cli::run_program(args);
        std::fflush(stdout);
        std::fflush(stderr);
        return status;
      },
      py::arg("args"), "Runs `mate ARGS...` in this process; returns its exit status");
  m.def(
      "env_json",
      [](bool all) {
        config::EnvReportOptions options;
        options.all = all;
        options.internal = all;
        return config::render_json(config::collect(options)).dump();
      },
      py::arg("all") = true, "`mate env --json` (every variable with all=True)");
  py::register_exception<config::ConfigError>(m, "ConfigError", PyExc_ValueError);
  m.def(
      "config_value",
      [](const std::string& name) -> py::object {
        const config::VarInfo* v = config::find(name);
        if (v == nullptr) throw py::key_error("no variable " + name + " in MATE's registry");
        const config::Value value = config::get(v->id);  // ConfigError names the variable and what it accepts
        switch (v->type) {
          case config::Type::Bool: return py::bool_(value.boolean);
          case config::Type::Int: return py::int_(value.integer);
          case config::Type::Float: return py::float_(value.real);
          case config::Type::PatternList:
          case config::Type::ArchList: return py::cast(value.list);
          default: return py::str(value.text);
        }
      },
      py::arg("name"), "A variable's typed value, read through the registry (ConfigError when invalid)");
  m.def(
      "config_is_set", [](const std::string& name) {
        const config::VarInfo* v = config::find(name);
        if (v == nullptr) throw py::key_error("no variable " + name + " in MATE's registry");
        return config::is_set(v->id);
      },
      py::arg("name"));
  m.def("shard_of_test_file", &core::shard_of_test_file, py::arg("path"), py::arg("total"),
        "The shard of a test file (mate/core/test_shard.hpp), as MATE's GoogleTest main splits");
  m.def("shard_index_error", &config::shard_index_error, py::arg("index"), py::arg("total"),
        "Why MATE_PYTEST_SHARD_INDEX=index does not go with MATE_PYTEST_SHARD_TOTAL=total, or \"\"");
  m.def("library_directory", &core::code_directory, "The directory of libmate.so");
  m.def("install_tree", &core::install_tree, "libmate.so's directory's parent (bin/, lib/ below it)");
}

}  // namespace mate::python
