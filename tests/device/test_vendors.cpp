// The vendor table (mate/device/vendors.hpp): every row complete and consistent with the
// configuration registry, kinds / names / DLPack codes unique, lookups that round-trip, and
// each vendor's values as MATE has always used them.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <string_view>

#include "mate/config.hpp"
#include "mate/device/vendors.hpp"

namespace {

using mate::config::Type;
using mate::config::Var;
using mate::device::find_vendor;
using mate::device::Kind;
using mate::device::Vendor;
using mate::device::vendors;

bool filled(const char* text) { return text != nullptr && *text != '\0'; }

// The '|'-separated choices of an Enum variable.
std::set<std::string> choices(Var v) {
  std::set<std::string> out;
  std::string_view list = mate::config::info(v).accepts;
  while (true) {
    const std::size_t bar = list.find('|');
    out.emplace(list.substr(0, bar));
    if (bar == std::string_view::npos) return out;
    list.remove_prefix(bar + 1);
  }
}

TEST(Vendors, EveryRowIsComplete) {
  ASSERT_FALSE(vendors().empty());
  for (const Vendor& v : vendors()) {
    SCOPED_TRACE(v.name);
    EXPECT_NE(v.kind, Kind::Host);
    EXPECT_TRUE(filled(v.name));
    EXPECT_TRUE(filled(v.title));
    EXPECT_NE(v.dl_device, kDLCPU);
    ASSERT_FALSE(v.driver_sonames.empty());
    for (const char* soname : v.driver_sonames) EXPECT_TRUE(filled(soname));
    EXPECT_TRUE(filled(v.symbol_prefix));
    EXPECT_TRUE(filled(v.compiler));
    EXPECT_TRUE(filled(v.compiler_fallback));
    EXPECT_TRUE(filled(v.example_arch));
    EXPECT_FALSE(v.pic_flags.empty());
    ASSERT_FALSE(v.arch_flags.empty());
    bool has_arch = false;
    for (const char* flag : v.arch_flags) has_arch = has_arch || std::string_view(flag).find("{}") != std::string_view::npos;
    EXPECT_TRUE(has_arch) << "no arch_flags entry takes the arch ({})";
    EXPECT_EQ(v.source_extension[0], '.');
    EXPECT_EQ(v.header_extension[0], '.');
    EXPECT_TRUE(filled(v.caching_allocator_variable));
    EXPECT_EQ(v.separate_host_compiler, v.host_compiler_variable.has_value());
  }
}

TEST(Vendors, RowsNameTheirVariablesInTheRegistry) {
  const std::set<std::string> drivers = choices(Var::MATE_DEVICE_DRIVER);
  for (const Vendor& v : vendors()) {
    SCOPED_TRACE(v.name);
    // MATE_DEVICE_DRIVER accepts the vendor by name.
    EXPECT_TRUE(drivers.count(v.name)) << "add " << v.name << " to MATE_DEVICE_DRIVER's choices";
    EXPECT_EQ(mate::config::info(v.compiler_variable).type, Type::Path);
    EXPECT_EQ(mate::config::info(v.arch_list_variable).type, Type::ArchList);
    EXPECT_EQ(mate::config::info(v.extra_flags_variable).type, Type::String);
    if (v.host_compiler_variable) {
      EXPECT_EQ(mate::config::info(*v.host_compiler_variable).type, Type::String);
    }
    for (Var e : v.compiler_environment) EXPECT_EQ(mate::config::info(e).type, Type::String);
    // The per-vendor variables carry the vendor's name (MATE_CUDA_ARCH_LIST, MATE_EXTRA_CUDAFLAGS).
    std::string upper = v.name;
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    EXPECT_NE(mate::config::info(v.arch_list_variable).name.find(upper), std::string_view::npos);
    EXPECT_NE(mate::config::info(v.extra_flags_variable).name.find(upper), std::string_view::npos);
  }
  EXPECT_EQ(drivers.size(), vendors().size() + 1) << "MATE_DEVICE_DRIVER: auto plus one per vendor";
  EXPECT_TRUE(drivers.count("auto"));
}

TEST(Vendors, KindsNamesAndDevicesAreUnique) {
  std::set<Kind> kinds;
  std::set<std::string> names, prefixes, compilers, extensions;
  std::set<int> dl_types;
  std::set<Var> variables;
  for (const Vendor& v : vendors()) {
    EXPECT_TRUE(kinds.insert(v.kind).second) << v.name;
    EXPECT_TRUE(names.insert(v.name).second) << v.name;
    EXPECT_TRUE(prefixes.insert(v.symbol_prefix).second) << v.name;
    EXPECT_TRUE(compilers.insert(v.compiler).second) << v.name;
    EXPECT_TRUE(extensions.insert(v.source_extension).second) << v.name;
    EXPECT_TRUE(extensions.insert(v.header_extension).second) << v.name;
    EXPECT_TRUE(dl_types.insert(v.dl_device).second) << v.name;
    if (v.dl_managed_device) {
      EXPECT_TRUE(dl_types.insert(*v.dl_managed_device).second) << v.name;
    }
    if (v.dl_pinned_host_device) {
      EXPECT_TRUE(dl_types.insert(*v.dl_pinned_host_device).second) << v.name;
    }
    for (Var var : {v.compiler_variable, v.extra_flags_variable, v.arch_list_variable})
      EXPECT_TRUE(variables.insert(var).second) << v.name << ": " << mate::config::info(var).name;
  }
  EXPECT_FALSE(dl_types.count(kDLCPU));
}

TEST(Vendors, LookupsRoundTrip) {
  EXPECT_EQ(find_vendor(Kind::Host), nullptr);
  EXPECT_EQ(find_vendor(std::string_view("host")), nullptr);
  EXPECT_EQ(find_vendor(kDLCPU), nullptr);
  EXPECT_STREQ(mate::device::kind_name(Kind::Host), "host");
  EXPECT_STREQ(mate::device::kind_title(Kind::Host), "host");
  for (std::size_t i = 0; i < vendors().size(); ++i) {
    const Vendor& v = vendors()[i];
    SCOPED_TRACE(v.name);
    EXPECT_EQ(mate::device::kind_index(v.kind), i + 1);
    EXPECT_EQ(find_vendor(v.kind), &v);
    EXPECT_EQ(find_vendor(std::string_view(v.name)), &v);
    EXPECT_EQ(find_vendor(v.dl_device), &v);
    if (v.dl_managed_device) {
      EXPECT_EQ(find_vendor(*v.dl_managed_device), &v);
    }
    if (v.dl_pinned_host_device) {
      // Pinned host memory is the host's to read, but its code still names the vendor.
      EXPECT_EQ(find_vendor(*v.dl_pinned_host_device), nullptr);
      EXPECT_EQ(mate::device::find_vendor_of_pinned_host(*v.dl_pinned_host_device), &v);
    }
    EXPECT_STREQ(mate::device::kind_name(v.kind), v.name);
    EXPECT_STREQ(mate::device::kind_title(v.kind), v.title);
  }
  EXPECT_EQ(mate::device::kKindCount, vendors().size() + 1);
}

// What each vendor has always been: these values are in users' environments, caches and dumps.
TEST(Vendors, CudaRowIsUnchanged) {
  const Vendor* v = find_vendor(Kind::Cuda);
  ASSERT_NE(v, nullptr);
  EXPECT_STREQ(v->name, "cuda");
  EXPECT_STREQ(v->title, "CUDA");
  EXPECT_EQ(v->dl_device, kDLCUDA);
  EXPECT_EQ(v->dl_managed_device, kDLCUDAManaged);
  EXPECT_EQ(v->dl_pinned_host_device, kDLCUDAHost);
  ASSERT_EQ(v->driver_sonames.size(), 1u);
  EXPECT_STREQ(v->driver_sonames[0], "libcuda.so.1");  // never the toolkit's link stub libcuda.so
  EXPECT_STREQ(v->symbol_prefix, "cu");
  EXPECT_STREQ(v->compiler, "nvcc");
  EXPECT_EQ(v->compiler_variable, Var::MATE_NVCC);
  EXPECT_EQ(v->arch_list_variable, Var::MATE_CUDA_ARCH_LIST);
  EXPECT_EQ(v->extra_flags_variable, Var::MATE_EXTRA_CUDAFLAGS);
  EXPECT_EQ(v->host_compiler_variable, Var::NVCC_CCBIN);
  EXPECT_STREQ(v->caching_allocator_variable, "PYTORCH_NO_CUDA_MEMORY_CACHING");
  EXPECT_EQ(mate::device::vendors().front().kind, Kind::Cuda) << "auto tries CUDA first";
}

TEST(Vendors, MusaRowIsUnchanged) {
  const Vendor* v = find_vendor(Kind::Musa);
  ASSERT_NE(v, nullptr);
  EXPECT_STREQ(v->name, "musa");
  EXPECT_STREQ(v->title, "MUSA");
  EXPECT_EQ(v->dl_device, kDLExtDev);  // MATE's MUSA code: DLPack's extension device
  EXPECT_EQ(mate::device::kDLMUSA, kDLExtDev);
  EXPECT_FALSE(v->dl_managed_device.has_value());
  EXPECT_FALSE(v->dl_pinned_host_device.has_value());
  ASSERT_EQ(v->driver_sonames.size(), 2u);
  EXPECT_STREQ(v->driver_sonames[0], "libmusa.so.1");
  EXPECT_STREQ(v->driver_sonames[1], "libmusa.so");
  EXPECT_STREQ(v->symbol_prefix, "mu");
  EXPECT_STREQ(v->compiler, "mcc");
  EXPECT_EQ(v->compiler_variable, Var::MATE_MCC);
  EXPECT_EQ(v->arch_list_variable, Var::MATE_MUSA_ARCH_LIST);
  EXPECT_EQ(v->extra_flags_variable, Var::MATE_EXTRA_MUSAFLAGS);
  EXPECT_FALSE(v->separate_host_compiler);
  EXPECT_STREQ(v->caching_allocator_variable, "PYTORCH_NO_MUSA_MEMORY_CACHING");
}

}  // namespace
