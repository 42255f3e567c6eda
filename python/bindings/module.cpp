// mate._mate: the Python package's view of libmate.so. Thin: the work is the C++ core's.
#include "bindings.hpp"

PYBIND11_MODULE(_mate, m) {
  m.doc() = "MATE's C++ core (libmate.so), for the mate package";
  mate::python::add_api_logging(m);
  mate::python::add_replay(m);
  mate::python::add_memory_debug(m);
  mate::python::add_program(m);
}
