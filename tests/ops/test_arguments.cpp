// Bad arguments: each gets an ArgumentError naming the function, the argument, what is wrong and
// what is accepted, before any kernel runs.
#include <limits>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "mate/jit/module.hpp"
#include "mate/ops/contiguous_layout.hpp"
#include "mate/ops/ops.hpp"
#include "ops_test_support.hpp"

namespace {

using mate::config::ScopedOverride;
using mate::config::Var;
using mate::tensor::ScalarType;
using namespace mate::ops;
using namespace mate::ops::testing;
using ::testing::AllOf;
using ::testing::HasSubstr;


template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const ArgumentError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no ArgumentError";
  return "";
}

struct GemmArgs : ::testing::Test {
  HostTensor a{{4, 8}, ScalarType::F32}, b{{3, 8}, ScalarType::F32}, out{{4, 3}, ScalarType::F32};
};

TEST_F(GemmArgs, NullTensor) {
  EXPECT_EQ(error_of([&] { gemm_nt(nullptr, b.cdl(), out.dl()); }),
            "mate::ops::gemm_nt: argument 'a': is a null pointer (a tensor is required)");
}

TEST_F(GemmArgs, WrongRank) {
  HostTensor v({8}, ScalarType::F32);
  EXPECT_EQ(error_of([&] { gemm_nt(a.cdl(), v.cdl(), out.dl()); }),
            "mate::ops::gemm_nt: argument 'b': has 1 dimensions, shape [8] (accepted: 2 dimensions)");
}

TEST_F(GemmArgs, WrongDtypes) {
  HostTensor ai({4, 8}, ScalarType::I32), bb({3, 8}, ScalarType::BF16), ob({4, 3}, ScalarType::BF16);
  EXPECT_EQ(error_of([&] { gemm_nt(ai.cdl(), b.cdl(), out.dl()); }),
            "mate::ops::gemm_nt: argument 'a': has dtype i32 (accepted: f32, bf16)");
  EXPECT_EQ(error_of([&] { gemm_nt(a.cdl(), bb.cdl(), out.dl()); }),
            "mate::ops::gemm_nt: argument 'b': has dtype bf16 but 'a' has f32 (they must be the same)");
  EXPECT_EQ(error_of([&] { gemm_nt(a.cdl(), b.cdl(), ob.dl()); }),
            "mate::ops::gemm_nt: argument 'out': has dtype bf16 (accepted: f32)");
}

TEST_F(GemmArgs, ShapeMismatch) {
  HostTensor b7({3, 7}, ScalarType::F32), o5({4, 5}, ScalarType::F32);
  EXPECT_EQ(error_of([&] { gemm_nt(a.cdl(), b7.cdl(), out.dl()); }),
            "mate::ops::gemm_nt: argument 'b': has shape [3, 7]: dimension 1 is 7 but must be 8 (k, the columns of "
            "'a': b is [n, k] in the NT layout)");
  EXPECT_THAT(error_of([&] { gemm_nt(a.cdl(), b.cdl(), o5.dl()); }),
              HasSubstr("argument 'out': has shape [4, 5]: dimension 1 is 5 but must be 3 (n, the rows of 'b')"));
}

TEST_F(GemmArgs, NonContiguousStrides) {
  std::int64_t strides[2] = {1, 4};  // a column-major view of a
  a.raw().strides = strides;
  EXPECT_EQ(error_of([&] { gemm_nt(a.cdl(), b.cdl(), out.dl()); }),
            "mate::ops::gemm_nt: argument 'a': is not row-major contiguous: shape [4, 8], strides [1, 4] (accepted: "
            "compact row-major strides, or NULL strides)");
}

TEST_F(GemmArgs, MisalignedData) {
  a.raw().byte_offset = 2;
  EXPECT_THAT(error_of([&] { gemm_nt(a.cdl(), b.cdl(), out.dl()); }),
              AllOf(HasSubstr("argument 'a': data + byte_offset = 0x"),
                    HasSubstr("is not aligned to its element size of 4 bytes")));
}

TEST_F(GemmArgs, NullShape) {
  a.raw().shape = nullptr;
  EXPECT_EQ(error_of([&] { gemm_nt(a.cdl(), b.cdl(), out.dl()); }),
            "mate::ops::gemm_nt: argument 'a': has 2 dimensions but a null shape pointer");
}

TEST_F(GemmArgs, NullDataWithElements) {
  a.raw().data = nullptr;
  EXPECT_EQ(error_of([&] { gemm_nt(a.cdl(), b.cdl(), out.dl()); }),
            "mate::ops::gemm_nt: argument 'a': has a null data pointer and 32 elements");
}

TEST_F(GemmArgs, ALayoutBeyond64Bits) {
  std::int64_t huge[2] = {std::int64_t{1} << 62, 8};
  a.raw().shape = huge;
  EXPECT_EQ(error_of([&] { gemm_nt(a.cdl(), b.cdl(), out.dl()); }),
            "mate::ops::gemm_nt: argument 'a': has an invalid layout (shape [4611686018427387904, 8]): element count "
            "overflows 64 bits");
}

TEST_F(GemmArgs, OutputOverlappingAnInput) {
  DLTensor alias = *out.dl();
  alias.data = a.raw().data;  // out written over a
  EXPECT_THAT(error_of([&] { gemm_nt(a.cdl(), b.cdl(), &alias); }),
              AllOf(HasSubstr("argument 'out': overlaps input 'a' in memory"),
                    HasSubstr("the output must be a separate buffer")));
}

TEST_F(GemmArgs, DevicesWithoutKernelsAndMixedDevices) {
  a.raw().device = b.raw().device = out.raw().device = {mate::tensor::kDLMUSA, 0};
  EXPECT_EQ(error_of([&] { gemm_nt(a.cdl(), b.cdl(), out.dl()); }),
            "mate::ops::gemm_nt: the tensors are on musa:0, where the reference library has no kernels (accepted: "
            "cpu and cuda_host memory for the host kernels, cuda for the CUDA kernels)");
  b.raw().device = {kDLCPU, 0};
  EXPECT_EQ(error_of([&] { gemm_nt(a.cdl(), b.cdl(), out.dl()); }),
            "mate::ops::gemm_nt: argument 'b': is on cpu but 'a' is on musa:0 (all tensors of a call must be on one "
            "device)");
}

std::vector<std::string> no_archs() { return {}; }

TEST_F(GemmArgs, CudaTensorsWithoutABuildableCudaModuleSayWhy) {
  // No arch list and no visible device: the CUDA module cannot be built, and the error says so.
  mate::jit::set_device_arch_detector(mate::device::Kind::Cuda, &no_archs);
  ScopedOverride list(Var::MATE_CUDA_ARCH_LIST, std::nullopt);
  for (auto* t : {&a, &b, &out}) t->raw().device = {kDLCUDA, 0};
  try {
    gemm_nt(a.cdl(), b.cdl(), out.dl());
    FAIL() << "expected a ModuleError";
  } catch (const mate::jit::ModuleError& e) {
    EXPECT_EQ(e.kind(), mate::jit::ModuleError::Kind::NotBuildable);
    EXPECT_THAT(e.what(), AllOf(HasSubstr("mate::ops::gemm_nt: the tensors are on a CUDA device, which needs the "
                                          "CUDA kernel module: "),
                                HasSubstr("mate_ops_gemm_nt_f32_cuda"), HasSubstr("MATE_CUDA_ARCH_LIST")));
  }
}

TEST(RmsNormArgs, HiddenZeroEpsAndWeight) {
  HostTensor x({2, 0}, ScalarType::F32), w0({0}, ScalarType::F32), o0({2, 0}, ScalarType::F32);
  EXPECT_EQ(error_of([&] { rmsnorm(x.cdl(), w0.cdl(), o0.dl()); }),
            "mate::ops::rmsnorm: argument 'input': has hidden size 0, shape [2, 0] (accepted: hidden >= 1; the mean "
            "over no elements is undefined)");
  HostTensor y({2, 4}, ScalarType::F32), w({4}, ScalarType::F32), w5({5}, ScalarType::F32), o({2, 4}, ScalarType::F32);
  EXPECT_EQ(error_of([&] { rmsnorm(y.cdl(), w.cdl(), o.dl(), -1.0f); }),
            "mate::ops::rmsnorm: argument 'eps': is -1 (accepted: a finite value >= 0)");
  EXPECT_THAT(error_of([&] { rmsnorm(y.cdl(), w.cdl(), o.dl(), std::numeric_limits<float>::quiet_NaN()); }),
              HasSubstr("argument 'eps': is nan (accepted: a finite value >= 0)"));
  EXPECT_THAT(error_of([&] { rmsnorm(y.cdl(), w5.cdl(), o.dl()); }),
              HasSubstr("argument 'weight': has shape [5]: dimension 0 is 5 but must be 4"));
  HostTensor ob({2, 4}, ScalarType::BF16);
  EXPECT_THAT(error_of([&] { rmsnorm(y.cdl(), w.cdl(), ob.dl()); }),
              HasSubstr("argument 'out': has dtype bf16 but 'input' has f32 (they must be the same)"));
}

struct GroupedArgs : ::testing::Test {
  std::int64_t m_sum = 256, n = 4, k = 3;
  HostTensor lhs{{256, 3}, ScalarType::F32}, rhs{{2, 4, 3}, ScalarType::F32}, out{{256, 4}, ScalarType::F32},
      idx{{256}, ScalarType::I32};
  GroupedArgs() {
    auto layout = make_contiguous_layout(std::vector<std::int64_t>{100, 128}, 128);
    for (std::int64_t r = 0; r < m_sum; ++r) idx.set_i32(r, layout.m_indices[r]);
  }
  void call() { m_grouped_gemm_nt_contiguous(lhs.cdl(), rhs.cdl(), out.dl(), idx.cdl()); }
};

TEST_F(GroupedArgs, AValidLayoutRuns) { EXPECT_NO_THROW(call()); }

TEST_F(GroupedArgs, MSumNotAMultipleOfTheAlignment) {
  HostTensor l({200, 3}, ScalarType::F32), o({200, 4}, ScalarType::F32), i({200}, ScalarType::I32);
  EXPECT_EQ(error_of([&] { m_grouped_gemm_nt_contiguous(l.cdl(), rhs.cdl(), o.dl(), i.cdl()); }),
            "mate::ops::m_grouped_gemm_nt_contiguous: argument 'lhs': has m_sum = 200 rows, not a multiple of the M "
            "alignment 128 (get_mk_alignment_for_contiguous_layout(), MATE_DEEPGEMM_MK_ALIGNMENT); pad each group's "
            "rows with make_contiguous_layout()");
}

TEST_F(GroupedArgs, TheAlignmentFollowsTheVariable) {
  // The layout was padded to 128: group 1 starts at row 128, inside the first 256-row block.
  ScopedOverride align(Var::MATE_DEEPGEMM_MK_ALIGNMENT, "256");
  EXPECT_THAT(error_of([&] { call(); }),
              HasSubstr("rows 0 and 128 of the aligned block [0, 256) belong to groups 0 and 1: each group's rows "
                        "must start at a multiple of the M alignment 256"));
  for (std::int64_t r = 128; r < m_sum; ++r) idx.set_i32(r, -1);  // only group 0: valid for 256 too
  EXPECT_NO_THROW(call());
}

TEST_F(GroupedArgs, IndexOutOfRange) {
  idx.set_i32(7, 2);
  EXPECT_EQ(error_of([&] { call(); }),
            "mate::ops::m_grouped_gemm_nt_contiguous: argument 'm_indices': m_indices[7] = 2 is out of range "
            "(accepted: 0..1 for the groups of 'rhs', -1 for padding rows)");
  idx.set_i32(7, -2);
  EXPECT_THAT(error_of([&] { call(); }), HasSubstr("m_indices[7] = -2 is out of range"));
}

TEST_F(GroupedArgs, TwoGroupsInOneAlignedBlock) {
  idx.set_i32(100, 1);  // group 1 starting at row 100 instead of 128
  EXPECT_EQ(error_of([&] { call(); }),
            "mate::ops::m_grouped_gemm_nt_contiguous: argument 'm_indices': rows 0 and 100 of the aligned block [0, "
            "128) belong to groups 0 and 1: each group's rows must start at a multiple of the M alignment 128 "
            "(get_mk_alignment_for_contiguous_layout(); make_contiguous_layout() pads them)");
}

TEST_F(GroupedArgs, IndexDtypeAndShapes) {
  HostTensor i64({256}, ScalarType::I64), i100({100}, ScalarType::I32), r2({2, 4, 5}, ScalarType::F32);
  EXPECT_EQ(error_of([&] { m_grouped_gemm_nt_contiguous(lhs.cdl(), rhs.cdl(), out.dl(), i64.cdl()); }),
            "mate::ops::m_grouped_gemm_nt_contiguous: argument 'm_indices': has dtype i64 (accepted: i32)");
  EXPECT_THAT(error_of([&] { m_grouped_gemm_nt_contiguous(lhs.cdl(), rhs.cdl(), out.dl(), i100.cdl()); }),
              HasSubstr("argument 'm_indices': has shape [100]: dimension 0 is 100 but must be 256"));
  EXPECT_THAT(error_of([&] { m_grouped_gemm_nt_contiguous(lhs.cdl(), r2.cdl(), out.dl(), idx.cdl()); }),
              HasSubstr("argument 'rhs': has shape [2, 4, 5]: dimension 2 is 5 but must be 3 (k, the columns of "
                        "'lhs': rhs is [groups, n, k] in the NT layout)"));
}

}  // namespace
