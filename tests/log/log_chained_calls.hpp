// Instrumented functions built optimized, for the test that the logging path preserves registers.
#pragma once

#include <dlpack/dlpack.h>

namespace mate::testing {

[[gnu::noinline]] float chained_run(float x, float y, double z, int k);
[[gnu::noinline]] float chained_scope(float x, float y, double z, int k);
[[gnu::noinline]] double chained_outputs(double x, float y, DLTensor* out);

}  // namespace mate::testing
