// mate/jit/catalog.hpp — the modules a program knows about, for `mate module-status` and
// `mate aot-build`.
//
// A kernel library registers a provider listing its module specs (all parameter combinations
// it may load). Register from code that is certainly linked in (a function the library's init
// calls, or a *_command.cpp of the mate program): a static registration object inside a static
// library is dropped by the linker when nothing references its object file.
#pragma once

#include <string>
#include <vector>

#include "mate/jit/module.hpp"

namespace mate::jit {

using ModuleProvider = std::vector<ModuleSpec> (*)();

// `library` names the provider in reports ("mate.samples", "mate.ops"). Registering the same
// provider twice has no effect.
void register_module_provider(const std::string& library, ModuleProvider provider);

struct CatalogEntry {
  std::string library;
  ModuleSpec spec;
};
// Every module of every registered provider, MATE's own sample modules first.
std::vector<CatalogEntry> known_modules();

// MATE's sample modules (library "mate.samples"): a host AXPY rendered for {dtype, tile} and a
// CUDA scale kernel. They exercise the whole pipeline and serve as templates for kernel authors.
std::vector<ModuleSpec> sample_modules();
// The host AXPY sample for one parameter set: exports
//   void mate_sample_axpy(long n, <dtype> alpha, const <dtype>* x, <dtype>* y)
ModuleSpec sample_axpy_spec(const std::string& dtype, int tile);
// The CUDA sample: exports int mate_sample_scale(float* x, float a, int n) (a kernel launch).
ModuleSpec sample_cuda_scale_spec();

}  // namespace mate::jit
