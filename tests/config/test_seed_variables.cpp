// The registry holds every variable of seed 000 (plus the CUDA counterparts) with the documented
// default. This list is copied from the seed on purpose: it fails when the registry drifts.
#include <gtest/gtest.h>

#include <charconv>

#include "mate/config.hpp"

namespace mate::config {
namespace {

struct SeedVariable {
  const char* name;
  const char* documented_default;
};

constexpr SeedVariable kSeed[] = {
    {"MATE_LOGLEVEL", "0"},
    {"MATE_LOGDEST", "stdout"},
    {"MATE_DUMP_DIR", "mate_dumps"},
    {"MATE_DUMP_MAX_SIZE_GB", "20"},
    {"MATE_DUMP_MAX_COUNT", "1000"},
    {"MATE_DUMP_SAFETENSORS", "0"},
    {"MATE_DUMP_INCLUDE", "empty"},
    {"MATE_DUMP_EXCLUDE", "empty"},
    {"MATE_MUSA_ARCH_LIST", "auto-detect visible devices"},
    {"MATE_WORKSPACE_BASE", "home directory"},
    {"MATE_DISABLE_JIT", "0"},
    {"MATE_JIT_VERBOSE", "0"},
    {"MATE_DEEPGEMM_MK_ALIGNMENT", "128"},
    {"MATE_EXTRA_CFLAGS", "empty"},
    {"MATE_EXTRA_MUSAFLAGS", "empty"},
    {"MATE_EXTRA_LDFLAGS", "empty"},
    {"MATE_MCC", "auto-detected"},
    {"MATE_GUARD_ALLOCATOR_AUTO_INSTALL", "unset"},
    {"MATE_GUARD_ALLOCATOR_MODE", "unset"},
    {"MATE_GUARD_ALLOCATOR_SYNC_ON_FREE", "unset"},
    {"MATE_GUARD_ALLOCATOR_LOG_ALLOCATIONS", "unset"},
    {"MATE_PYTEST_GUARD_ALLOC", "0"},
    {"MATE_PYTEST_GUARD_MODE", "tail"},
    {"MATE_PYTEST_GUARD_LOG_ALLOCATIONS", "0"},
    {"MATE_DRY_RUN", "0"},
    {"MATE_PYTEST_SHARD_TOTAL", "1"},
    {"MATE_PYTEST_SHARD_INDEX", "0"},
    {"MATE_PYTEST_SHARD_MODE", "file"},
    // CUDA counterparts of the MUSA variables.
    {"MATE_CUDA_ARCH_LIST", "auto-detect visible devices"},
    {"MATE_NVCC", "auto-detected"},
    {"MATE_EXTRA_CUDAFLAGS", "empty"},
};

TEST(SeedVariables, EveryOneIsRegisteredWithItsDocumentedDefault) {
  for (const SeedVariable& s : kSeed) {
    const VarInfo* v = find(s.name);
    ASSERT_NE(v, nullptr) << s.name << " is missing from the registry";
    EXPECT_EQ(v->shown_default, s.documented_default) << s.name;
    EXPECT_NE(v->category, Category::External) << s.name;
  }
}

TEST(SeedVariables, TheTypedDefaultAgreesWithTheDocumentedOne) {
  for (const SeedVariable& s : kSeed) {
    const VarInfo& v = *find(s.name);
    std::string_view shown = v.shown_default;
    Value d = parse(v.id, "");
    if (shown == "empty" || shown == "unset" || shown.find("auto") == 0 || shown == "home directory") {
      EXPECT_TRUE(v.default_value.empty()) << s.name;
      continue;
    }
    switch (v.type) {
      case Type::Bool: EXPECT_EQ(d.boolean, shown == "1") << s.name; break;
      case Type::Int: EXPECT_EQ(std::to_string(d.integer), shown) << s.name; break;
      case Type::Float: EXPECT_EQ(d.real, std::stod(std::string(shown))) << s.name; break;
      default: EXPECT_EQ(d.text, shown) << s.name; break;
    }
  }
}

TEST(SeedVariables, BuildToolVariablesAreExternal) {
  for (const char* name : {"CXX", "MAX_JOBS"}) {
    const VarInfo* v = find(name);
    ASSERT_NE(v, nullptr) << name;
    EXPECT_EQ(v->category, Category::External);
  }
}

TEST(SeedVariables, GuardBootstrapVariablesAreInternalAndPytestOnesTestOnly) {
  for (const VarInfo& v : all_variables()) {
    std::string_view n = v.name;
    if (n.rfind("MATE_GUARD_ALLOCATOR_", 0) == 0) {
      EXPECT_EQ(v.category, Category::Internal) << n;
    }
    if (n.rfind("MATE_PYTEST_", 0) == 0) {
      EXPECT_EQ(v.category, Category::TestOnly) << n;
    }
  }
}

// An Int variable's accepted set or range is made of integers: the scalar reader checks them as
// integers, and a bound it could not read would go unchecked.
TEST(Registry, IntegerVariablesAcceptIntegerBounds) {
  auto integer = [](std::string_view text) {
    std::int64_t value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    return ec == std::errc() && end == text.data() + text.size() && !text.empty();
  };
  for (const VarInfo& v : all_variables()) {
    if (v.type != Type::Int || v.accepts.empty()) continue;
    std::string_view accepts = v.accepts;
    if (const std::size_t dots = accepts.find(".."); dots != std::string_view::npos) {
      if (dots > 0) {
        EXPECT_TRUE(integer(accepts.substr(0, dots))) << v.name << ": " << accepts;
      }
      if (dots + 2 < accepts.size()) {
        EXPECT_TRUE(integer(accepts.substr(dots + 2))) << v.name << ": " << accepts;
      }
      continue;
    }
    for (std::size_t start = 0;;) {
      const std::size_t bar = accepts.find('|', start);
      EXPECT_TRUE(integer(accepts.substr(start, bar == std::string_view::npos ? bar : bar - start)))
          << v.name << ": " << accepts;
      if (bar == std::string_view::npos) break;
      start = bar + 1;
    }
  }
}

TEST(Registry, EveryEntryIsComplete) {
  for (const VarInfo& v : all_variables()) {
    EXPECT_FALSE(v.doc.empty()) << v.name;
    EXPECT_FALSE(v.shown_default.empty()) << v.name;
    EXPECT_EQ(&info(v.id), &v);
    EXPECT_NO_THROW(parse(v.id, "")) << v.name << ": its default does not parse";
  }
}

}  // namespace
}  // namespace mate::config
