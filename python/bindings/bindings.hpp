// The parts of the extension module mate._mate, one file each.
#pragma once

#include <pybind11/pybind11.h>

namespace mate::python {

void add_api_logging(pybind11::module_& m);  // api_logging.cpp: the decorator's calls
void add_replay(pybind11::module_& m);       // replay.cpp: replaying dumped Python calls
void add_memory_debug(pybind11::module_& m); // memory_debug.cpp: the guarded allocator
void add_program(pybind11::module_& m);      // program.cpp: `mate` in-process, env, paths

}  // namespace mate::python
