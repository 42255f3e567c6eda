// Makes the reference kernels replayable: `mate replay` runs a dumped ops.* call again through
// these registrations (docs/dumps-and-replay.md). The names are the ones each MATE_API logs.
#include "mate/ops/ops.hpp"
#include "mate/replay/registry.hpp"

MATE_REPLAYABLE("ops.gemm_nt", &mate::ops::gemm_nt, "a", "b", "out", "alpha", "beta");
MATE_REPLAYABLE("ops.rmsnorm", &mate::ops::rmsnorm, "input", "weight", "out", "eps");
MATE_REPLAYABLE("ops.m_grouped_gemm_nt_contiguous", &mate::ops::m_grouped_gemm_nt_contiguous, "lhs", "rhs",
                "out", "m_indices");

// Nothing calls into this file, so a static link would drop it with its registrations: every
// program that links mate::ops references this anchor (see CMakeLists.txt).
extern "C" void mate_ops_replay_anchor() {}
