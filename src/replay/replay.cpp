// Replaying one dumped call: rebuild the arguments, run the registered function, compare.
#include "mate/replay/replay.hpp"

#include <fnmatch.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <stdexcept>

#include "mate/device/driver.hpp"
#include "mate/device/vendors.hpp"
#include "mate/dump/call_record.hpp"
#include "mate/log/arg_json.hpp"
#include "mate/replay/registry.hpp"
#include "mate/tensor/memory.hpp"
#include "mate/tensor/stats.hpp"
#include "no_dumps.hpp"
#include "rebuild.hpp"

namespace mate::replay {

namespace {

using dump::CallRecord;
using dump::RecordedArg;
using dump::TensorRecord;
using tensor::ScalarType;

class DefaultAllocator final : public TensorAllocator {
 public:
  std::uintptr_t allocate(DLDevice device, std::size_t bytes) override {
    const tensor::Memory m = tensor::memory_of(device);
    if (m == tensor::Memory::Host) {
      void* p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
      if (p == nullptr) throw std::runtime_error("out of host memory for " + std::to_string(bytes) + " bytes");
      return reinterpret_cast<std::uintptr_t>(p);
    }
    // The backend of the tensor's own device ordinal: its memory is made on that device.
    std::string why;
    device::Backend* b = tensor::backend_for(device, &why);
    if (b == nullptr)
      throw std::runtime_error("the tensor was recorded on " + tensor::device_name(device) + ", which replay cannot make memory on here (" +
                               why + "); --device N replays every device tensor on device N instead");
    const std::size_t g = b->granularity();
    const std::size_t size = (bytes + g - 1) / g * g;
    std::uintptr_t base = 0;
    device::Status st = b->reserve(size, &base);
    if (st.ok()) {
      st = b->map(base, size);
      if (!st.ok()) b->release(base, size);
    }
    if (!st.ok())
      throw std::runtime_error(std::string("cannot allocate ") + std::to_string(bytes) + " bytes of " +
                               tensor::device_name(device) + " memory (" + (st.what ? st.what : "?") + ")");
    return base;
  }
  void deallocate(DLDevice device, std::uintptr_t address, std::size_t bytes) noexcept override {
    if (tensor::memory_of(device) == tensor::Memory::Host) {
      std::free(reinterpret_cast<void*>(address));
      return;
    }
    if (device::Backend* b = tensor::backend_for(device)) {
      const std::size_t g = b->granularity();
      const std::size_t size = (bytes + g - 1) / g * g;
      b->unmap(address, size);
      b->release(address, size);
    }
  }
};

// `arg`'s stored tensor, moved to options.device when that is set and the tensor is device memory.
dump::TensorRecord load_on_device(const CallRecord& call, const RecordedArg& arg, const Options& options) {
  dump::TensorRecord t = dump::load_tensor(call, arg);
  const tensor::Memory m = tensor::memory_of(t.device);
  if (options.device && m != tensor::Memory::Host && m != tensor::Memory::Other) t.device.device_id = *options.device;
  return t;
}

// While alive, the device of the call's device tensors (when they are all on one device) is
// current on this thread, as it was when the call was made (a library that launches on the
// current device launches there); the thread's context is put back afterwards.
class CallDeviceScope {
 public:
  explicit CallDeviceScope(const std::vector<std::unique_ptr<detail::RebuiltTensor>>& tensors) {
    std::optional<DLDevice> only;
    for (const auto& t : tensors) {
      if (!t) continue;
      const DLDevice d = t->dl.device;
      const tensor::Memory m = tensor::memory_of(d);
      if (m == tensor::Memory::Host || m == tensor::Memory::Other) continue;
      if (only && (only->device_type != d.device_type || only->device_id != d.device_id)) return;  // several: left as is
      only = d;
    }
    if (!only) return;
    // A backend set for tests (not a driver's) has no context to make current.
    backend_ = dynamic_cast<device::DriverBackend*>(tensor::backend_for(*only));
    if (backend_ != nullptr && !backend_->make_current(&previous_).ok()) backend_ = nullptr;
  }
  ~CallDeviceScope() {
    if (backend_ != nullptr) backend_->restore_current(previous_);
  }
  CallDeviceScope(const CallDeviceScope&) = delete;
  CallDeviceScope& operator=(const CallDeviceScope&) = delete;

 private:
  device::DriverBackend* backend_ = nullptr;
  void* previous_ = nullptr;
};

bool kind_matches(ParamKind p, const RecordedArg& a) {
  using K = RecordedArg::Kind;
  switch (p) {
    case ParamKind::InputTensor:
    case ParamKind::WritableTensor: return a.kind == K::Tensor || (a.kind == K::None && a.type == "tensor");
    case ParamKind::Bool: return a.kind == K::Bool;
    case ParamKind::Int:
    case ParamKind::UInt:
    case ParamKind::Enum: return a.kind == K::Int || a.kind == K::UInt || a.kind == K::Enum;
    case ParamKind::Float: return a.kind == K::Float;
    case ParamKind::String: return a.kind == K::String || (a.kind == K::None && a.type == "str");
    case ParamKind::Value: return a.kind != K::Tensor && !(a.kind == K::None && a.type == "tensor");
  }
  return false;
}

// One element of type T at `p` (dump buffers give no alignment guarantee, hence memcpy).
template <class T>
T load(const std::uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

double decode(ScalarType t, const std::uint8_t* p) {
  switch (t) {
    case ScalarType::F64: return load<double>(p);
    case ScalarType::F32: return load<float>(p);
    case ScalarType::F16: return tensor::half_to_float(load<std::uint16_t>(p));
    case ScalarType::BF16: return tensor::bf16_to_float(load<std::uint16_t>(p));
    case ScalarType::F8E4M3: return tensor::fp8_e4m3fn_to_float(*p);
    case ScalarType::F8E5M2: return tensor::fp8_e5m2_to_float(*p);
    case ScalarType::I8: return load<std::int8_t>(p);
    case ScalarType::I16: return load<std::int16_t>(p);
    case ScalarType::I32: return load<std::int32_t>(p);
    case ScalarType::I64: return static_cast<double>(load<std::int64_t>(p));
    case ScalarType::U8: return *p;
    case ScalarType::U16: return load<std::uint16_t>(p);
    case ScalarType::U32: return load<std::uint32_t>(p);
    case ScalarType::U64: return static_cast<double>(load<std::uint64_t>(p));
    case ScalarType::Bool: return *p != 0;
    case ScalarType::Unsupported: break;
  }
  return 0;
}

// Integers and bool are compared exactly, whatever the tolerances: through a double, i64/u64
// values above 2^53 that differ by a few units would round to the same value and pass.
bool compared_exactly(ScalarType t) noexcept { return t != ScalarType::Unsupported && !tensor::is_floating(t); }

// The exact value of an integer or bool element (every one fits in 128 bits).
__int128 decode_exact(ScalarType t, const std::uint8_t* p) {
  switch (t) {
    case ScalarType::I8: return load<std::int8_t>(p);
    case ScalarType::I16: return load<std::int16_t>(p);
    case ScalarType::I32: return load<std::int32_t>(p);
    case ScalarType::I64: return load<std::int64_t>(p);
    case ScalarType::U8: return *p;
    case ScalarType::U16: return load<std::uint16_t>(p);
    case ScalarType::U32: return load<std::uint32_t>(p);
    case ScalarType::U64: return load<std::uint64_t>(p);
    case ScalarType::Bool: return *p != 0;  // any non-zero byte is true
    default: break;
  }
  return 0;
}

std::string int128_text(__int128 v) {
  if (v == 0) return "0";
  const bool negative = v < 0;
  unsigned __int128 m = negative ? -static_cast<unsigned __int128>(v) : static_cast<unsigned __int128>(v);
  std::string s;
  for (; m != 0; m /= 10) s.insert(s.begin(), static_cast<char>('0' + static_cast<int>(m % 10)));
  return negative ? "-" + s : s;
}

// Bit `at` from `base`, little bit-endian as DLPack 1.1 packs sub-byte types (`at` may be
// negative: a negative stride's elements lie before element (0, ..., 0)).
int bit_at(const std::uint8_t* base, std::int64_t at) {
  const std::int64_t byte = at / 8 - (at % 8 < 0), shift = at - byte * 8;  // floor division
  return (base[byte] >> shift) & 1;
}

// Whether the `width` bits at bit `a` from `p` equal those at bit `b` from `q` (elements of a
// packed sub-byte type).
bool same_bits(const std::uint8_t* p, std::int64_t a, const std::uint8_t* q, std::int64_t b, std::int64_t width) {
  for (std::int64_t i = 0; i < width; ++i)
    if (bit_at(p, a + i) != bit_at(q, b + i)) return false;
  return true;
}

// The `width` bits at bit `at` from `p` as hex: "0x5" for an fp4 element, "0x7f" for a byte,
// "0x3f800000" for the four bytes of the f32 1.0. A vector type's element can be megabits wide:
// past 64 digits the most significant ones are shown, then "...".
std::string bits_text(const std::uint8_t* p, std::int64_t at, std::int64_t width) {
  constexpr std::int64_t kMostDigits = 64;
  auto bit = [&](std::int64_t i) { return bit_at(p, at + i); };
  std::string s = "0x";
  const std::int64_t digits = (width + 3) / 4;
  for (std::int64_t digit = digits - 1; digit >= 0 && digits - digit <= kMostDigits; --digit) {
    int v = 0;
    for (int b = 3; b >= 0; --b) v = v * 2 + (digit * 4 + b < width ? bit(digit * 4 + b) : 0);
    s += "0123456789abcdef"[v];
  }
  if (digits > kMostDigits) s += "...";
  return s;
}

// Visits the elements of a layout in row-major logical order, with each one's offset in
// elements from element (0, ..., 0).
template <class F>
void for_each_element(const std::vector<std::int64_t>& shape, const std::vector<std::int64_t>& strides, F&& f) {
  for (std::int64_t d : shape)
    if (d == 0) return;
  std::vector<std::int64_t> idx(shape.size(), 0);
  for (;;) {
    std::int64_t off = 0;
    for (std::size_t i = 0; i < shape.size(); ++i) off += idx[i] * strides[i];
    f(idx, off);
    std::size_t i = shape.size();
    while (i > 0) {
      --i;
      if (++idx[i] < shape[i]) break;
      idx[i] = 0;
      if (i == 0) return;
    }
    if (shape.empty()) return;
  }
}

OutputCheck compare(const std::string& name, const TensorRecord& expected, const DLTensor& g, const Options& o) {
  OutputCheck c;
  c.name = name;
  const std::vector<std::int64_t> got_shape(g.shape, g.shape + g.ndim);
  if (got_shape != expected.shape) {
    c.ok = false;
    c.problem = "shape differs from the recorded one";
    return c;
  }
  if (g.dtype.code != expected.dtype.code || g.dtype.bits != expected.dtype.bits || g.dtype.lanes != expected.dtype.lanes) {
    c.ok = false;
    c.problem = "dtype " + tensor::dtype_name(g.dtype) + " differs from the recorded " + tensor::dtype_name(expected.dtype);
    return c;
  }
  const ScalarType st = tensor::scalar_type(g.dtype);
  // What MATE cannot decode has no tolerance to apply: equal means the same bits.
  c.compared_bits = st == ScalarType::Unsupported;
  const bool bitwise = o.exact || c.compared_bits;
  const tensor::TensorView gv(g);
  const std::vector<std::uint8_t> now = tensor::read_extent(gv);
  const std::uint8_t* got0 = now.data() - gv.extent().begin;
  const std::uint8_t* exp0 = expected.data.data() - expected.data_begin;
  const auto es = static_cast<std::int64_t>(gv.element_size());
  // A packed type is never one MATE decodes (whole bytes each), so it is compared bit by bit:
  // gp and ep below are then unused.
  const bool packed = tensor::is_packed(g.dtype);
  const std::int64_t width = tensor::element_bits(g.dtype);
  const Tolerance def = default_tolerance(st);  // integers and bool ignore it: compared_exactly
  const double rtol = o.rtol.value_or(def.rtol), atol = o.atol.value_or(def.atol);
  for_each_element(expected.shape, expected.strides, [&](const std::vector<std::int64_t>& idx, std::int64_t eoff) {
    std::int64_t goff = 0;
    for (std::size_t i = 0; i < idx.size(); ++i) goff += idx[i] * gv.stride(static_cast<int>(i));
    const std::uint8_t* gp = packed ? got0 : got0 + goff * es;
    const std::uint8_t* ep = packed ? exp0 : exp0 + eoff * es;
    ++c.count;
    const double a = st == ScalarType::Unsupported ? 0 : decode(st, gp);
    const double b = st == ScalarType::Unsupported ? 0 : decode(st, ep);
    bool bad;
    double abs_err = 0;
    const __int128 x = compared_exactly(st) ? decode_exact(st, gp) : 0, y = compared_exactly(st) ? decode_exact(st, ep) : 0;
    if (bitwise) {
      bad = packed ? !same_bits(got0, goff * width, exp0, eoff * width, width)
                   : std::memcmp(gp, ep, static_cast<std::size_t>(es)) != 0;
      abs_err = !bad ? 0
                : compared_exactly(st) ? static_cast<double>(x > y ? x - y : y - x)
                : std::isfinite(a - b) ? std::fabs(a - b) : std::numeric_limits<double>::infinity();
    } else if (compared_exactly(st)) {
      bad = x != y;
      abs_err = static_cast<double>(x > y ? x - y : y - x);
    } else if (std::isnan(a) || std::isnan(b)) {
      bad = std::isnan(a) != std::isnan(b);
      abs_err = bad ? std::numeric_limits<double>::infinity() : 0;
    } else if (std::isinf(a) || std::isinf(b)) {
      bad = a != b;
      abs_err = bad ? std::numeric_limits<double>::infinity() : 0;
    } else {
      abs_err = std::fabs(a - b);
      bad = abs_err > atol + rtol * std::fabs(b);
    }
    const double rel_err = abs_err == 0 ? 0 : (b != 0 ? abs_err / std::fabs(b) : std::numeric_limits<double>::infinity());
    if (bad) ++c.mismatched;
    if (rel_err > c.max_rel_error) c.max_rel_error = rel_err;
    if (abs_err > c.max_abs_error || (bad && c.where.empty())) {
      c.max_abs_error = std::max(c.max_abs_error, abs_err);
      c.where = idx;
      c.got = a;
      c.expected = b;
      if (compared_exactly(st)) c.got_exact = int128_text(x), c.expected_exact = int128_text(y);
      if (c.compared_bits) {
        c.got_exact = bits_text(got0, packed ? goff * width : goff * es * 8, width);
        c.expected_exact = bits_text(exp0, packed ? eoff * width : eoff * es * 8, width);
      }
    }
  });
  c.ok = c.mismatched == 0;
  return c;
}

OutputCheck compare_scalar(const RecordedArg& expected, const log::Arg& got, const Options& o) {
  OutputCheck c;
  c.name = "return";
  c.count = 1;
  using K = log::Arg::Kind;
  if (got.kind == K::String || expected.kind == K::String) {
    c.ok = got.kind == K::String && expected.kind == K::String && got.text == expected.text;
    if (!c.ok) c.problem = "returned \"" + got.text + "\", recorded \"" + expected.text + "\"";
    return c;
  }
  auto as_double = [](const log::Arg& a) {
    return a.kind == K::Bool ? a.bool_value : a.kind == K::UInt ? static_cast<double>(a.uint_value) : a.kind == K::Float ? a.float_value : static_cast<double>(a.int_value);
  };
  if (got.kind != K::Float && expected.kind != K::Float) {
    // Integers, enums and bool: exactly, like integer tensors (see compared_exactly).
    const __int128 x = got.kind == K::Bool ? __int128{got.bool_value} : got.kind == K::UInt ? __int128{got.uint_value} : __int128{got.int_value};
    const __int128 y = expected.kind == K::Bool ? __int128{expected.bool_value} : expected.kind == K::UInt ? __int128{expected.uint_value}
                                                                                                        : __int128{expected.int_value};
    c.ok = x == y;
    c.got = static_cast<double>(x);
    c.expected = static_cast<double>(y);
    c.got_exact = int128_text(x);
    c.expected_exact = int128_text(y);
    c.max_abs_error = static_cast<double>(x > y ? x - y : y - x);
    c.max_rel_error = c.max_abs_error == 0 ? 0 : y != 0 ? c.max_abs_error / std::fabs(c.expected) : std::numeric_limits<double>::infinity();
    if (!c.ok) c.mismatched = 1;
    return c;
  }
  const double a = as_double(got);
  const double b = as_double(expected);
  const Tolerance def = got.kind == K::Float ? default_tolerance(got.type == "f32" ? ScalarType::F32 : ScalarType::F64) : Tolerance{};
  const double rtol = got.kind == K::Float ? o.rtol.value_or(def.rtol) : 0, atol = got.kind == K::Float ? o.atol.value_or(def.atol) : 0;
  c.got = a;
  c.expected = b;
  c.max_abs_error = std::isnan(a) && std::isnan(b) ? 0 : std::fabs(a - b);
  c.max_rel_error = b != 0 ? c.max_abs_error / std::fabs(b) : (c.max_abs_error == 0 ? 0 : std::numeric_limits<double>::infinity());
  const bool same = (std::isnan(a) && std::isnan(b)) || a == b;
  c.ok = o.exact || got.kind != K::Float ? same : (same || c.max_abs_error <= atol + rtol * std::fabs(b));
  if (!c.ok) c.mismatched = 1;
  return c;
}

std::string join_index(const std::vector<std::int64_t>& idx) {
  std::string s = "[";
  for (std::size_t i = 0; i < idx.size(); ++i) s += (i ? ", " : "") + std::to_string(idx[i]);
  return s + "]";
}

std::string fmt_double(double v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

CallResult run_call(const CallRecord& call, const Options& o) {
  CallResult r;
  r.dir = call.dir;
  r.function = call.function;
  r.seq = call.seq;
  // A Python function: the resolver (python -m mate replay) imports it.
  std::optional<Replayable> from_python;
  if (!call.python_function.empty()) {
    const PythonResolver& resolve = python_resolver();
    if (!resolve) {
      r.message = "function \"" + call.function + "\" was logged from Python (" + call.python_function +
                  "): replay it with `python -m mate replay --dir " + call.dir + "`";
      return r;
    }
    from_python = resolve(call);
  }
  const Replayable* fn = from_python ? &*from_python : find_function(call.function);
  if (fn == nullptr) {
    r.message = "function \"" + call.function + "\" is not registered (load the library that registers it with --lib PATH)";
    return r;
  }
  if (call.status == dump::CallStatus::WritingInputs) {
    r.message = "the inputs were never completely saved (status writing_inputs)";
    return r;
  }
  if (call.inputs.size() != fn->params.size()) {
    r.message = "the dump records " + std::to_string(call.inputs.size()) + " arguments, the registered " +
                call.function + " takes " + std::to_string(fn->params.size());
    return r;
  }
  TensorAllocator& alloc = o.allocator ? *o.allocator : default_allocator();
  std::vector<Value> values(fn->params.size());
  std::vector<std::optional<detail::TensorSource>> sources(fn->params.size());
  const bool keeps_layout = dump::keeps_layout(call);
  using K = RecordedArg::Kind;
  for (std::size_t k = 0; k < fn->params.size(); ++k) {
    const RecordedArg& a = call.inputs[k];
    const ParamKind p = fn->params[k];
    if (!fn->names.empty() && k < fn->names.size() && fn->names[k] != a.name) {
      r.message = "argument " + std::to_string(k) + " is recorded as \"" + a.name + "\", the registration names it \"" + fn->names[k] + "\"";
      return r;
    }
    if (!kind_matches(p, a)) {
      r.message = "argument " + std::to_string(k) + " (\"" + a.name + "\") is recorded as " + log::kind_name(a.kind) + " (" + a.type +
                  "), the registered function takes " + to_string(p);
      return r;
    }
    Value& v = values[k];
    v.recorded = &a;
    if (a.kind == K::Tensor) {
      sources[k] = detail::TensorSource{load_on_device(call, a, o), keeps_layout ? detail::recorded_range(a) : std::nullopt};
    } else if (a.kind == K::None) {
      v.null_string = true;
    } else if (p == ParamKind::UInt) {
      if (a.kind != K::UInt && a.int_value < 0) {
        r.message = "argument " + a.name + " is negative, the registered function takes an unsigned integer";
        return r;
      }
      v.uint_value = a.kind == K::UInt ? a.uint_value : static_cast<std::uint64_t>(a.int_value);
    } else {
      v.bool_value = a.bool_value;
      v.int_value = a.kind == K::UInt ? static_cast<std::int64_t>(a.uint_value) : a.int_value;
      v.float_value = a.float_value;
      v.text = a.text;
    }
  }
  // All tensors at once: those that shared memory at capture time share it again.
  const std::vector<std::unique_ptr<detail::RebuiltTensor>> tensors = detail::rebuild_tensors(std::move(sources), alloc);
  for (std::size_t k = 0; k < tensors.size(); ++k)
    if (tensors[k]) values[k].tensor = &tensors[k]->dl;
  std::optional<log::Arg> ret;
  try {
    const CallDeviceScope on_the_call_device(tensors);
    ret = fn->invoke(values);
  } catch (const std::exception& e) {
    const bool raised_before = call.status == dump::CallStatus::Raised;
    r.outcome = raised_before ? Outcome::NoReference : Outcome::Error;
    r.message = std::string(raised_before ? "raised again, as in the original call: " : "raised: ") + e.what();
    return r;
  }
  if (call.status != dump::CallStatus::Completed) {
    r.outcome = Outcome::NoReference;
    r.message = std::string("the original call did not complete (status ") + dump::to_string(call.status) +
                (call.exception_message.empty() ? "" : ": " + call.exception_message) + (call.error.empty() ? "" : ": " + call.error) + ")";
    return r;
  }
  for (const RecordedArg& out : call.outputs) {
    if (out.name == "return") {
      if (!ret) {
        r.message = "the dump records a return value, the registered function returns none";
        return r;
      }
      if (out.kind == K::Tensor && ret->kind == K::Tensor && ret->tensor) {
        // A returned tensor (Python functions return their results): compared where it lives.
        r.outputs.push_back(compare("return", load_on_device(call, out, o), ret->tensor->dl(), o));
        continue;
      }
      if (out.kind == K::List && ret->kind == K::List) {
        // A returned tuple or list: its tensors, item by item.
        if (out.items.size() != ret->items.size()) {
          r.message = "the dump records a return value of " + std::to_string(out.items.size()) + " items, the function returned " +
                      std::to_string(ret->items.size());
          return r;
        }
        for (std::size_t i = 0; i < out.items.size(); ++i) {
          const RecordedArg& want = out.items[i];
          const log::Arg& got = ret->items[i];
          if (want.kind == K::Tensor && got.kind == K::Tensor && got.tensor)
            r.outputs.push_back(compare("return[" + std::to_string(i) + "]", load_on_device(call, want, o), got.tensor->dl(), o));
          else if (want.kind != K::Tensor && want.kind != K::List && want.kind != K::None) {
            r.outputs.push_back(compare_scalar(want, got, o));
            r.outputs.back().name = "return[" + std::to_string(i) + "]";
          }
        }
        continue;
      }
      if (out.kind == K::Tensor || out.kind == K::List || out.kind == K::None) continue;  // not comparable as a scalar
      r.outputs.push_back(compare_scalar(out, *ret, o));
      continue;
    }
    if (out.kind != K::Tensor) continue;  // scalar outputs other than the return value carry no result
    std::size_t k = 0;
    while (k < call.inputs.size() && call.inputs[k].name != out.name) ++k;
    if (k == call.inputs.size() || !tensors[k]) {
      r.message = "output " + out.name + " is not a tensor argument of the call, so it cannot be compared";
      return r;
    }
    r.outputs.push_back(compare(out.name, load_on_device(call, out, o), tensors[k]->dl, o));
  }
  if (r.outputs.empty()) {
    r.outcome = Outcome::NoReference;
    r.message = "the dump records no outputs to compare";
    return r;
  }
  r.outcome = Outcome::Passed;
  for (const OutputCheck& c : r.outputs) {
    if (c.ok) continue;
    if (r.outcome == Outcome::Passed) r.outcome = Outcome::Mismatch, r.message.clear();
    if (!r.message.empty()) r.message += "; ";
    if (!c.problem.empty()) {
      r.message += c.name + ": " + c.problem;
    } else if (c.compared_bits) {
      r.message += c.name + ": " + std::to_string(c.mismatched) + " of " + std::to_string(c.count) +
                   " elements differ bit for bit, first at " + join_index(c.where) + " (got " + c.got_exact + ", expected " +
                   c.expected_exact + ")";
    } else if (c.name == "return") {
      r.message += "return: got " + (c.got_exact.empty() ? fmt_double(c.got) : c.got_exact) + ", expected " +
                   (c.expected_exact.empty() ? fmt_double(c.expected) : c.expected_exact) + ", abs error " +
                   fmt_double(c.max_abs_error) + ", rel error " + fmt_double(c.max_rel_error);
    } else {
      const bool exact_text = !c.got_exact.empty();
      r.message += c.name + ": " + std::to_string(c.mismatched) + " of " + std::to_string(c.count) + " elements differ, max abs error " +
                   fmt_double(c.max_abs_error) + " at " + join_index(c.where) + " (got " +
                   (exact_text ? c.got_exact : fmt_double(c.got)) + ", expected " +
                   (exact_text ? c.expected_exact : fmt_double(c.expected)) + "), max rel error " + fmt_double(c.max_rel_error);
    }
  }
  return r;
}

// Reads call.json and replays it; `starting` hears of the call first.
CallResult replay_dir(const std::string& dir, const Options& options,
                      const std::function<void(const std::string&, const std::string&)>& starting) {
  // The caller's callback runs outside the try: an exception of its own (stdout closed) is not
  // this call's error and must not skip the call silently; it goes to the caller.
  CallResult r;
  r.dir = dir;
  CallRecord call;
  try {
    call = dump::read_call(dir);
  } catch (const std::exception& e) {
    if (starting) starting(dir, "");  // call.json unreadable: reported as the error
    r.outcome = Outcome::Error;
    r.message = e.what();
    return r;
  }
  if (starting) starting(dir, call.function);
  try {
    return run_call(call, options);
  } catch (const std::exception& e) {
    r.function = call.function;
    r.seq = call.seq;
    r.outcome = Outcome::Error;
    r.message = e.what();
  }
  return r;
}

}  // namespace

TensorAllocator& default_allocator() {
  static DefaultAllocator a;
  return a;
}

Tolerance default_tolerance(ScalarType t) noexcept {
  switch (t) {
    case ScalarType::F64: return {1e-7, 1e-7};
    case ScalarType::F32: return {1.3e-6, 1e-5};
    case ScalarType::F16: return {1e-3, 1e-5};
    case ScalarType::BF16: return {1.6e-2, 1e-5};
    case ScalarType::F8E4M3: return {1.25e-1, 1e-2};
    case ScalarType::F8E5M2: return {2.5e-1, 1e-2};
    default: return {0, 0};
  }
}

const char* to_string(Outcome o) noexcept {
  switch (o) {
    case Outcome::Passed: return "passed";
    case Outcome::Mismatch: return "mismatch";
    case Outcome::NoReference: return "no reference";
    case Outcome::Error: return "error";
  }
  return "?";
}

CallResult replay_call(const std::string& dir, const Options& options) {
  const detail::NoDumpsWhileReplaying no_dumps;
  return replay_dir(dir, options, {});
}

std::size_t replay_each(const std::string& path, const Options& options, const Progress& progress) {
  const detail::NoDumpsWhileReplaying no_dumps;
  std::size_t count = 0;
  for (const std::string& dir : dump::find_call_dirs(path)) {
    if (!options.filter.empty()) {
      // An unreadable call.json cannot be filtered by function name: it is reported.
      try {
        CallRecord call = dump::read_call(dir);
        if (::fnmatch(options.filter.c_str(), call.function.c_str(), 0) != 0) continue;
      } catch (const std::exception&) {
      }
    }
    CallResult r = replay_dir(dir, options, progress.starting);
    ++count;
    if (progress.finished) progress.finished(r);
  }
  return count;
}

std::vector<CallResult> replay_all(const std::string& path, const Options& options) {
  std::vector<CallResult> out;
  replay_each(path, options, {nullptr, [&](const CallResult& r) { out.push_back(r); }});
  return out;
}

std::string format_name(const std::string& dir, const std::string& function) {
  std::filesystem::path p = std::filesystem::path(dir).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  return p.filename().string() + "  " + (function.empty() ? "?" : function);
}

std::string format_outcome(const CallResult& r) {
  std::string text = to_string(r.outcome);
  if (!r.message.empty()) text += ": " + r.message;
  return text;
}

std::string format_line(const CallResult& r) { return format_name(r.dir, r.function) + "  " + format_outcome(r); }

}  // namespace mate::replay
