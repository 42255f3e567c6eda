// Instrumented functions for LogTest.ValuesLiveAcrossTheLoggingPathSurviveIt, built optimized
// (tests/log/CMakeLists.txt) as a library would be: tests are otherwise built with -Og, which keeps
// such values in memory, and the test is about values kept in registers across the logging path.
#include "log_chained_calls.hpp"

#include "mate/log/api.hpp"

namespace mate::testing {

float chained_run(float x, float y, double z, int k) {
  return MATE_API("chained_run", x, y, z, k).run([&] {
    return static_cast<float>(x * 0.5f + y * z) + static_cast<float>(k);
  });
}

float chained_scope(float x, float y, double z, int k) {
  MATE_API_SCOPE("chained_scope", x, y, z, k);
  return static_cast<float>(x * 0.5f + y * z) + static_cast<float>(k);
}

double chained_outputs(double x, float y, DLTensor* out) {
  double kept = x * 3.0 + y;  // live across the whole logging path
  return MATE_API("chained_outputs", x, y, out).stream(nullptr).outputs(MATE_ARGS(out)).run([&] {
    static_cast<float*>(out->data)[0] = static_cast<float>(kept);
    return kept - x + static_cast<double>(y);
  });
}

}  // namespace mate::testing
