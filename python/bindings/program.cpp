// `mate` in the interpreter's process (python -m mate), the registry as Python sees it, and
// where MATE's files are (found from libmate.so, not /proc/self/exe, which is python).
#include <pybind11/stl.h>

#include <cstdio>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "config/env_report.hpp"
#include "mate/cli/program.hpp"
#include "mate/core/install_location.hpp"

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
  m.def("library_directory", &core::code_directory, "The directory of libmate.so");
  m.def("install_tree", &core::install_tree, "libmate.so's directory's parent (bin/, lib/ below it)");
}

}  // namespace mate::python
