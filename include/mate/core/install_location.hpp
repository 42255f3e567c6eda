// mate/core/install_location.hpp — where MATE's own files are, found from the code that runs.
//
// MATE's files sit in one tree: <prefix>/bin/mate, <prefix>/<libdir>/libmate.so and the guard's
// preload and hooks libraries next to it (in a build tree: build/<preset>/bin and .../lib). The
// tree is found from the module that holds this code (dladdr): libmate.so when MATE is loaded as
// a shared library — into a Python interpreter, whose /proc/self/exe is python, or into a
// kernel library's program — or the program itself when MATE is linked in statically.
#pragma once

#include <string>

namespace mate::core {

// The directory of the file that holds MATE's code in this process (absolute, symlinks
// resolved); "" if it cannot be found.
std::string code_directory();

// <code_directory()>/.. : the tree's top (the install prefix, or the build directory).
std::string install_tree();

}  // namespace mate::core
