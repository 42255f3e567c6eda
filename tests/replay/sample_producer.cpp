// Runs sample kernel calls so that MATE_LOGLEVEL=10 dumps them (the replay tests' workload).
//   sample_producer good   axpy (strided, offset), scale_inplace, sum
//   sample_producer raise  copy_or_throw(fail = true)
//   sample_producer crash  an instrumented call whose body aborts the process (sample.crash)
//   sample_producer inplace   prefix_step(x, out = x); prints each tensor's address range
//   sample_producer overlap   prefix_step(x, out = x one element further on); the same
//   sample_producer oob    write_past_end (writes one element past its output)
//   sample_producer int    increment_i64 on values above 2^53
//   sample_producer negative  increment_i64 on values below 0
//   sample_producer uint   increment_u64 on values above the largest i64
//   sample_producer bool   invert_bool
//   sample_producer e8m0   double_e8m0 on three float8_e8m0fnu scales (DLPack code 14)
//   sample_producer device1  copy_or_throw(fail = false) and current_device on cuda:1 tensors, in
//                          memory of device 1 of the driver MATE loads, device 1 current (run
//                          with the fake driver and two devices)
//   sample_producer mixed  mixed over a contiguous, a transposed and a sliced (byte offset) f32,
//                          bf16, f16, i8, bool, u32 and a negative-stride f32 tensor; prints
//                          each input's values in row-major order as JSON ({"a": [...], ...})
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <stdexcept>
#include <vector>

#include "mate/device/driver.hpp"
#include "mate/log/api.hpp"
#include "mate/tensor/dtype.hpp"
#include "mate/tensor/tensor_view.hpp"
#include "sample_ops.hpp"

namespace {

DLTensor make(std::vector<float>& storage, std::vector<std::int64_t>& shape, std::int64_t* strides,
              std::uint64_t byte_offset = 0) {
  DLTensor t{};
  t.data = storage.data();
  t.device = {kDLCPU, 0};
  t.ndim = static_cast<int>(shape.size());
  t.dtype = mate::tensor::dl_dtype(mate::tensor::ScalarType::F32);
  t.shape = shape.data();
  t.strides = strides;
  t.byte_offset = byte_offset;
  return t;
}

// A 1-D contiguous tensor of `type` over `data`.
DLTensor flat(void* data, mate::tensor::ScalarType type, std::int64_t* shape) {
  DLTensor t{};
  t.data = data;
  t.device = {kDLCPU, 0};
  t.ndim = 1;
  t.dtype = mate::tensor::dl_dtype(type);
  t.shape = shape;
  return t;
}

// "va <argument> <lo> <hi>": where a tensor argument lies, for tests that check aliasing.
void print_va(const char* name, const DLTensor& t) {
  const mate::tensor::VaRange va = mate::tensor::TensorView(t).va_range();
  std::cout << "va " << name << " " << va.lo << " " << va.hi << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "good";
  std::vector<float> xs(6), ys(8), outs(6);
  for (int i = 0; i < 6; ++i) xs[static_cast<std::size_t>(i)] = 0.5f * static_cast<float>(i) - 1.0f;
  for (int i = 0; i < 8; ++i) ys[static_cast<std::size_t>(i)] = static_cast<float>(i * i);
  std::vector<std::int64_t> shape{2, 3};
  std::int64_t xt_strides[] = {1, 2};  // x is the transpose of a 3x2 buffer
  DLTensor x = make(xs, shape, xt_strides);
  DLTensor y = make(ys, shape, nullptr, 2 * sizeof(float));  // starts two elements in
  DLTensor out = make(outs, shape, nullptr);
  if (mode == "device1") {
    // The fake driver's device memory is host memory: the sample kernels run on it as on a GPU.
    std::string reason;
    auto device1 = mate::device::open_driver_backend(mate::device::Kind::Cuda, 1, &reason);
    if (!device1) {
      std::cerr << "no device 1: " << reason << "\n";
      return 3;
    }
    const std::size_t bytes = device1->granularity();
    std::uintptr_t base = 0;
    if (!device1->reserve(bytes, &base).ok() || !device1->map(base, bytes).ok()) return 4;
    auto* memory = reinterpret_cast<float*>(base);
    std::copy(xs.begin(), xs.end(), memory);
    std::int64_t six[] = {6};
    DLTensor dx = flat(memory, mate::tensor::ScalarType::F32, six);
    DLTensor dout = flat(memory + 8, mate::tensor::ScalarType::F32, six);
    dx.device = dout.device = {kDLCUDA, 1};
    // Device 1 current, as a program working on cuda:1 has it (cudaSetDevice(1)).
    void* fake = dlopen(MATE_FAKE_DRIVER_LIBRARY, RTLD_NOW | RTLD_NOLOAD);
    using Retain = int (*)(void**, int);
    using SetCurrent = int (*)(void*);
    auto retain = fake ? reinterpret_cast<Retain>(dlsym(fake, "cuDevicePrimaryCtxRetain")) : nullptr;
    auto set_current = fake ? reinterpret_cast<SetCurrent>(dlsym(fake, "cuCtxSetCurrent")) : nullptr;
    void* ctx = nullptr;
    if (!retain || !set_current || retain(&ctx, 1) != 0 || set_current(ctx) != 0) return 5;
    sample::copy_or_throw(&dx, &dout, false);
    DLTensor where = flat(memory + 16, mate::tensor::ScalarType::F32, six);
    where.device = {kDLCUDA, 1};
    sample::current_device(&dx, &where);  // records 1
    device1->unmap(base, bytes);
    device1->release(base, bytes);
    return 0;
  }
  if (mode == "good") {
    sample::axpy(&x, &y, &out, 2.0f);
    sample::scale_inplace(&out, 0.25, sample::Rounding::Down, "quarter");
    std::cout << sample::sum(&out) << "\n";
  } else if (mode == "raise") {
    try {
      sample::copy_or_throw(&x, &out, true);
    } catch (const std::invalid_argument& e) {
      std::cout << "caught: " << e.what() << "\n";
    }
  } else if (mode == "crash") {
    sample::crash(&x);
  } else if (mode == "int" || mode == "negative") {
    // "negative": the first element, hence the reported mismatch and the return value, below 0.
    std::vector<std::int64_t> in{(std::int64_t{1} << 60) + 1, -5}, res(2), two{2};
    if (mode == "negative") in = {-7, 5};
    DLTensor a = flat(in.data(), mate::tensor::ScalarType::I64, two.data());
    DLTensor b = flat(res.data(), mate::tensor::ScalarType::I64, two.data());
    std::cout << sample::increment_i64(&a, &b) << "\n";
  } else if (mode == "uint") {
    std::vector<std::uint64_t> in{(std::uint64_t{1} << 63) + 5, 7}, res(2);
    std::vector<std::int64_t> two{2};
    DLTensor a = flat(in.data(), mate::tensor::ScalarType::U64, two.data());
    DLTensor b = flat(res.data(), mate::tensor::ScalarType::U64, two.data());
    std::cout << sample::increment_u64(&a, &b) << "\n";
  } else if (mode == "bool") {
    bool in[2] = {true, false}, res[2] = {false, false};
    std::vector<std::int64_t> two{2};
    DLTensor a = flat(in, mate::tensor::ScalarType::Bool, two.data());
    DLTensor b = flat(res, mate::tensor::ScalarType::Bool, two.data());
    std::cout << sample::invert_bool(&a, &b) << "\n";
  } else if (mode == "e8m0") {
    std::uint8_t in[3] = {127, 120, 130}, res[3] = {};  // 1, 2^-7, 8
    std::vector<std::int64_t> three{3};
    DLTensor a{in, {kDLCPU, 0}, 1, {14, 8, 1}, three.data(), nullptr, 0};
    DLTensor b{res, {kDLCPU, 0}, 1, {14, 8, 1}, three.data(), nullptr, 0};
    sample::double_e8m0(&a, &b);
  } else if (mode == "inplace" || mode == "overlap") {
    // prefix_step on one buffer: out = x, or out one element further on than x.
    std::vector<float> buf{1, 2, 3, 4, 5};
    std::vector<std::int64_t> four{4};
    DLTensor a = make(buf, four, nullptr);
    DLTensor b = make(buf, four, nullptr, mode == "overlap" ? sizeof(float) : 0);
    print_va("x", a);
    print_va("out", b);
    sample::prefix_step(&a, &b);
  } else if (mode == "oob") {
    std::vector<float> big(16);
    std::vector<std::int64_t> four{4};
    DLTensor o = make(big, four, nullptr);
    sample::write_past_end(&o, 4);  // within `big`: fine here, out of bounds for a 4-element buffer
  } else if (mode == "mixed") {
    using mate::tensor::ScalarType;
    std::vector<float> base(12);
    for (int i = 0; i < 12; ++i) base[static_cast<std::size_t>(i)] = 0.25f * static_cast<float>(i) - 1.0f;
    std::vector<std::int64_t> s34{3, 4}, s43{4, 3}, s22{2, 2}, s5{5}, s4{4}, s3{3}, s9{9};
    std::int64_t t_strides[] = {1, 4}, slice_strides[] = {4, 1}, neg_strides[] = {-2};
    DLTensor a = make(base, s34, nullptr);                        // contiguous 3x4
    DLTensor b = make(base, s43, t_strides);                      // its transpose
    DLTensor c = make(base, s22, slice_strides, 5 * sizeof(float));  // base[1:3, 1:3]: offset 5
    std::vector<std::uint16_t> bf{0x3f80, 0xc000, 0x4040, 0x3e80, 0x0000};  // 1, -2, 3, 0.25, 0
    std::vector<std::uint16_t> hf{0x3c00, 0xc000, 0x3800, 0x4500, 0x0000};  // 1, -2, 0.5, 5, 0
    std::vector<std::int8_t> i8{-128, -1, 0, 1, 127};
    bool bo[4] = {true, false, false, true};
    std::vector<std::uint32_t> u32{0, 1, 4000000000u};
    DLTensor d = flat(bf.data(), ScalarType::BF16, s5.data());
    DLTensor e = flat(hf.data(), ScalarType::F16, s5.data());
    DLTensor f = flat(i8.data(), ScalarType::I8, s5.data());
    DLTensor g = flat(bo, ScalarType::Bool, s4.data());
    DLTensor h = flat(u32.data(), ScalarType::U32, s3.data());
    DLTensor k = make(base, s3, neg_strides, 10 * sizeof(float));  // base[10], base[8], base[6]
    std::vector<float> res(9);
    DLTensor out = make(res, s9, nullptr);
    sample::mixed(&a, &b, &c, &d, &e, &f, &g, &h, &k, &out);
    auto row_major = [](const std::vector<float>& buf, std::vector<std::int64_t> idx) {
      std::string s = "[";
      for (std::size_t i = 0; i < idx.size(); ++i) s += (i ? ", " : "") + std::to_string(buf[static_cast<std::size_t>(idx[i])]);
      return s + "]";
    };
    std::cout << "{\"a\": " << row_major(base, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11})
              << ", \"b\": " << row_major(base, {0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11})
              << ", \"c\": " << row_major(base, {5, 6, 9, 10}) << ", \"d\": [1, -2, 3, 0.25, 0]"
              << ", \"e\": [1, -2, 0.5, 5, 0], \"f\": [-128, -1, 0, 1, 127], \"g\": [1, 0, 0, 1]"
              << ", \"h\": [0, 1, 4000000000], \"k\": " << row_major(base, {10, 8, 6}) << "}\n";
  } else {
    std::cerr << "unknown mode " << mode << "\n";
    return 2;
  }
  return 0;
}
