// mate/device/vendors.hpp — the device vendors MATE knows, one row each (CUDA, MUSA).
//
// Every switch over vendors reads this table: which driver library to open and its symbol
// prefix (src/device), the DLPack device codes of a vendor's memory and their names
// (src/tensor/dtype.cpp), the JIT toolchain that builds its modules (src/jit), the values of
// MATE_DEVICE_DRIVER, and the names reports use. Adding a vendor is one row here (its Kind
// enumerator and its MATE_* variables in config_variables.inc come with it) plus its tests;
// tests/device/test_vendors.cpp checks each row against the registry.
//
// Contract:
//  * The host is not a vendor: find_vendor(Kind::Host) is nullptr; kind_name()/kind_title()
//    answer "host" for it.
//  * Row i has Kind value i + 1 (Kind::Host is 0), so arrays indexed by Kind hold kKindCount
//    entries and a vendor's index is kind_index(kind) - 1.
//  * Every text field is a static string literal: safe to keep as Status::what or to read from a
//    signal handler or a malloc interposer. The table is constexpr: reading it allocates nothing.
#pragma once

#include <dlpack/dlpack.h>

#include <iterator>
#include <cstddef>
#include <optional>
#include <span>
#include <string_view>

#include "mate/config.hpp"
#include "mate/device/backend.hpp"

namespace mate::device {

// MATE's DLPack device code for MUSA memory. Upstream DLPack has no MUSA device type; MATE reads
// kDLExtDev (12, "reserved extension device") as MUSA, and a MUSA producer must export with it.
inline constexpr DLDeviceType kDLMUSA = kDLExtDev;

struct Vendor {
  Kind kind;
  // Lower case: MATE_DEVICE_DRIVER's value, Backend::name(), the JIT toolchain's name, the start
  // of device names ("cuda:0") and of JIT cache arch directories ("cuda_9.0").
  const char* name;
  const char* title;  // in sentences: "CUDA"

  // ---- DLPack ----
  DLDeviceType dl_device;  // the vendor's device memory
  // Managed memory the vendor's backend reads like device memory ("cuda_managed:0"), if any.
  std::optional<DLDeviceType> dl_managed_device;
  // Pinned host memory: host-readable, read as host memory ("cuda_host"), if any.
  std::optional<DLDeviceType> dl_pinned_host_device;

  // ---- Driver (src/device/driver_api.cpp) ----
  std::span<const char* const> driver_sonames;  // tried in order
  const char* symbol_prefix;  // entry point cuMemMap = symbol_prefix + "MemMap"

  // ---- JIT toolchain (src/jit) ----
  const char* compiler;             // program looked up on PATH: "nvcc"
  config::Var compiler_variable;    // overrides it: MATE_NVCC
  const char* compiler_fallback;    // where the vendor installs it when not on PATH
  config::Var extra_flags_variable; // MATE_EXTRA_CUDAFLAGS
  config::Var arch_list_variable;   // MATE_CUDA_ARCH_LIST
  const char* example_arch;         // for messages: "9.0"
  // Position-independent code with hidden visibility, as this compiler is told so.
  std::span<const char* const> pic_flags;
  // Per arch, "{}" replaced by the arch's digits ("9.0" -> "90").
  std::span<const char* const> arch_flags;
  // After every other compile flag, before "-c": what makes the compiler read the sources as
  // this vendor's language ("-x musa"); empty when the extension is enough.
  std::span<const char* const> language_flags;
  const char* source_extension;  // ".cu"
  const char* header_extension;  // ".cuh"
  // nvcc compiles host code with another compiler: JIT builds pass CXX as -ccbin and key
  // modules by that compiler's identity and by host_compiler_variable (NVCC_CCBIN).
  bool separate_host_compiler;
  std::optional<config::Var> host_compiler_variable;
  // Variables the compiler itself reads from its environment (NVCC_PREPEND_FLAGS, ...): part
  // of the module key, and an in-process override must reach the compiler.
  std::span<const config::Var> compiler_environment;

  // ---- Frameworks ----
  // Set to 1 for guarded programs (`mate guard-run`), so a framework's caching allocator does
  // not hide per-tensor boundaries: PYTORCH_NO_CUDA_MEMORY_CACHING.
  const char* caching_allocator_variable;
  // What the guarded allocator says when asked to allocate while a graph is being captured (a
  // static string: it is returned as an error text from the allocation path).
  const char* guard_graph_capture_refusal;
};

namespace vendor_rows {
// libcuda.so.1 is the driver's soname: the unversioned libcuda.so is a development symlink, or a
// link-time stub in the toolkit that must never be loaded. MUSA installs libmusa.so.1 and, on
// some systems, only libmusa.so.
inline constexpr const char* kCudaSonames[] = {"libcuda.so.1"};
inline constexpr const char* kMusaSonames[] = {"libmusa.so.1", "libmusa.so"};
inline constexpr const char* kNvccPicFlags[] = {"-Xcompiler", "-fPIC", "-Xcompiler", "-fvisibility=hidden"};
inline constexpr const char* kPicFlags[] = {"-fPIC", "-fvisibility=hidden"};
inline constexpr const char* kCudaArchFlags[] = {"-gencode", "arch=compute_{},code=sm_{}"};
inline constexpr const char* kMusaArchFlags[] = {"--offload-arch=mp_{}"};
inline constexpr const char* kMusaLanguageFlags[] = {"-x", "musa"};
inline constexpr config::Var kNvccEnvironment[] = {config::Var::NVCC_PREPEND_FLAGS,
                                                   config::Var::NVCC_APPEND_FLAGS};
}  // namespace vendor_rows

inline constexpr Vendor kVendors[] = {
    {
        .kind = Kind::Cuda,
        .name = "cuda",
        .title = "CUDA",
        .dl_device = kDLCUDA,
        .dl_managed_device = kDLCUDAManaged,
        .dl_pinned_host_device = kDLCUDAHost,
        .driver_sonames = vendor_rows::kCudaSonames,
        .symbol_prefix = "cu",
        .compiler = "nvcc",
        .compiler_variable = config::Var::MATE_NVCC,
        .compiler_fallback = "/usr/local/cuda/bin/nvcc",
        .extra_flags_variable = config::Var::MATE_EXTRA_CUDAFLAGS,
        .arch_list_variable = config::Var::MATE_CUDA_ARCH_LIST,
        .example_arch = "9.0",
        .pic_flags = vendor_rows::kNvccPicFlags,
        .arch_flags = vendor_rows::kCudaArchFlags,
        .language_flags = {},
        .source_extension = ".cu",
        .header_extension = ".cuh",
        .separate_host_compiler = true,
        .host_compiler_variable = config::Var::NVCC_CCBIN,
        .compiler_environment = vendor_rows::kNvccEnvironment,
        .caching_allocator_variable = "PYTORCH_NO_CUDA_MEMORY_CACHING",
        .guard_graph_capture_refusal = "guard allocator debug mode does not support CUDA graph capture",
    },
    {
        .kind = Kind::Musa,
        .name = "musa",
        .title = "MUSA",
        .dl_device = kDLMUSA,
        .dl_managed_device = std::nullopt,
        .dl_pinned_host_device = std::nullopt,
        .driver_sonames = vendor_rows::kMusaSonames,
        .symbol_prefix = "mu",
        .compiler = "mcc",
        .compiler_variable = config::Var::MATE_MCC,
        .compiler_fallback = "/usr/local/musa/bin/mcc",
        .extra_flags_variable = config::Var::MATE_EXTRA_MUSAFLAGS,
        .arch_list_variable = config::Var::MATE_MUSA_ARCH_LIST,
        .example_arch = "3.1",
        .pic_flags = vendor_rows::kPicFlags,
        .arch_flags = vendor_rows::kMusaArchFlags,
        .language_flags = vendor_rows::kMusaLanguageFlags,
        .source_extension = ".mu",
        .header_extension = ".muh",
        .separate_host_compiler = false,
        .host_compiler_variable = std::nullopt,
        .compiler_environment = {},
        .caching_allocator_variable = "PYTORCH_NO_MUSA_MEMORY_CACHING",
        .guard_graph_capture_refusal = "guard allocator debug mode does not support MUSA graph capture",
    },
};

// Kinds of memory: the host plus one per vendor (for arrays indexed by Kind).
inline constexpr std::size_t kKindCount = 1 + std::size(kVendors);

constexpr std::span<const Vendor> vendors() noexcept { return kVendors; }

constexpr std::size_t kind_index(Kind kind) noexcept { return static_cast<std::size_t>(kind); }

static_assert(kind_index(Kind::Host) == 0);
static_assert(
    [] {
      for (std::size_t i = 0; i < std::size(kVendors); ++i)
        if (kind_index(kVendors[i].kind) != i + 1) return false;
      return true;
    }(),
    "row i of kVendors must hold the Kind whose value is i + 1");

// The row of `kind`; nullptr for the host.
constexpr const Vendor* find_vendor(Kind kind) noexcept {
  for (const Vendor& v : kVendors)
    if (v.kind == kind) return &v;
  return nullptr;
}

// The row whose name is `name` ("cuda"), case-sensitive; nullptr when none.
constexpr const Vendor* find_vendor(std::string_view name) noexcept {
  for (const Vendor& v : kVendors)
    if (name == v.name) return &v;
  return nullptr;
}

// The vendor whose backend reads memory of DLPack device `type` (its device or managed memory);
// nullptr for host memory (pinned host memory included) and unknown devices.
constexpr const Vendor* find_vendor(DLDeviceType type) noexcept {
  for (const Vendor& v : kVendors)
    if (v.dl_device == type || v.dl_managed_device == type) return &v;
  return nullptr;
}

// The vendor whose pinned host memory has DLPack device `type`; nullptr when none.
constexpr const Vendor* find_vendor_of_pinned_host(DLDeviceType type) noexcept {
  for (const Vendor& v : kVendors)
    if (v.dl_pinned_host_device == type) return &v;
  return nullptr;
}

// "host", "cuda", "musa".
constexpr const char* kind_name(Kind kind) noexcept {
  const Vendor* v = find_vendor(kind);
  return v != nullptr ? v->name : "host";
}

// "host", "CUDA", "MUSA".
constexpr const char* kind_title(Kind kind) noexcept {
  const Vendor* v = find_vendor(kind);
  return v != nullptr ? v->title : "host";
}

}  // namespace mate::device
