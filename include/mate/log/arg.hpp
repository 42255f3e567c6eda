// mate/log/arg.hpp — the named, typed argument list of one instrumented API call.
//
// Instrumentation (mate/log/api.hpp) turns each argument into an Arg: tensors keep an owned copy
// of their DLPack metadata (never the data), scalars and strings their value, enums their number
// and, when an ADL `to_string(e)` exists, its text. Formatting, statistics and the call hooks
// (dumps) all work from this list, so every consumer sees the same arguments.
//
// Accepted argument types: DLTensor / DLTensor* / const DLTensor*, DLManagedTensor*,
// mate::tensor::TensorView,
// bool, integers, floating point, const char* / std::string / std::string_view, enums,
// std::optional<T> and std::nullopt, and ranges (std::vector, std::array, std::span) of any of
// these, e.g. a list of tensors. Another type T is accepted when an ADL function
// `mate_log_value(const T&)` returns one of them (e.g. a framework tensor -> TensorView).
#pragma once

#include <concepts>
#include <cstdint>
#include <optional>
#include <ranges>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "mate/tensor/tensor_view.hpp"

namespace mate::log {

struct Arg {
  enum class Kind { None, Bool, Int, UInt, Float, String, Enum, Tensor, List };
  std::string name;
  Kind kind = Kind::None;
  // The value's type as logged: "i32", "u64", "f32", "f64", "str", "enum", "tensor", "list";
  // for None, what is absent ("tensor" for a null tensor pointer, else "optional").
  std::string type;
  bool bool_value = false;         // Bool
  std::int64_t int_value = 0;      // Int, Enum
  std::uint64_t uint_value = 0;    // UInt
  double float_value = 0;          // Float
  std::string text;                // String; Enum label ("" when the enum has no to_string)
  // Tensor: its metadata. Read back from a record (mate/log/arg_json.hpp), `data` is the address
  // the tensor had when it was recorded (from "va"; null when none was recorded): never read it.
  std::optional<tensor::TensorMeta> tensor;
  std::vector<Arg> items;  // List

  // Where a dump stored this argument (set only on arguments read back from a dump's call.json):
  std::string file;   // Tensor: its file, relative to the call directory
  std::string key;    // Tensor: its key in `file`, for formats that hold several tensors
  std::string error;  // Tensor (or output value, kind None) that could not be saved: why
};

// A name given explicitly: MATE_API("f", MATE_NAMED("m", a.size(0))).
template <class T>
struct Named {
  const char* name;
  const T& value;
};
template <class T>
Named(const char*, const T&) -> Named<T>;

namespace detail {

template <class T>
concept HasToString = requires(const T& v) {
  { to_string(v) } -> std::convertible_to<std::string_view>;
};
template <class T>
concept HasLogValue = requires(const T& v) { mate_log_value(v); };
template <class T>
struct is_optional : std::false_type {};
template <class T>
struct is_optional<std::optional<T>> : std::true_type {};

std::string int_type_name(bool is_signed, std::size_t bytes);

// Describes `v` in `a`, a default-constructed Arg (its name aside): in place, since an Arg is
// large to move and a logged call makes one per argument.
template <class T>
void fill_arg(Arg& a, const T& v) {
  using U = std::remove_cvref_t<T>;
  if constexpr (std::is_same_v<U, tensor::TensorView>) {
    a.kind = Arg::Kind::Tensor;
    a.type = "tensor";
    a.tensor.emplace(v.dl());
  } else if constexpr (std::is_same_v<U, DLTensor>) {
    a.kind = Arg::Kind::Tensor;
    a.type = "tensor";
    a.tensor.emplace(v);
  } else if constexpr (std::is_same_v<U, DLTensor*> || std::is_same_v<U, const DLTensor*>) {
    a.type = "tensor";
    if (v != nullptr) {
      a.kind = Arg::Kind::Tensor;
      a.tensor.emplace(*v);
    }
  } else if constexpr (std::is_same_v<U, DLManagedTensor*> || std::is_same_v<U, const DLManagedTensor*>) {
    a.type = "tensor";
    if (v != nullptr) {
      a.kind = Arg::Kind::Tensor;
      a.tensor.emplace(v->dl_tensor);
    }
  } else if constexpr (std::is_same_v<U, bool>) {
    a.kind = Arg::Kind::Bool;
    a.type = "bool";
    a.bool_value = v;
  } else if constexpr (std::is_enum_v<U>) {
    a.kind = Arg::Kind::Enum;
    a.type = "enum";
    a.int_value = static_cast<std::int64_t>(v);
    if constexpr (HasToString<U>) a.text = std::string(std::string_view(to_string(v)));
  } else if constexpr (std::is_integral_v<U> && std::is_signed_v<U>) {
    a.kind = Arg::Kind::Int;
    a.type = int_type_name(true, sizeof(U));
    a.int_value = v;
  } else if constexpr (std::is_integral_v<U>) {
    a.kind = Arg::Kind::UInt;
    a.type = int_type_name(false, sizeof(U));
    a.uint_value = v;
  } else if constexpr (std::is_floating_point_v<U>) {
    a.kind = Arg::Kind::Float;
    a.type = sizeof(U) == 4 ? "f32" : "f64";
    a.float_value = static_cast<double>(v);
  } else if constexpr (std::is_convertible_v<const U&, std::string_view> && !std::is_same_v<U, std::nullptr_t>) {
    if constexpr (std::is_pointer_v<std::decay_t<U>>) {
      if (v == nullptr) {
        a.type = "str";
        return;
      }
    }
    a.kind = Arg::Kind::String;
    a.type = "str";
    a.text = std::string(std::string_view(v));
  } else if constexpr (std::is_same_v<U, std::nullopt_t> || std::is_same_v<U, std::nullptr_t>) {
    a.type = "optional";
  } else if constexpr (is_optional<U>::value) {
    if (v.has_value()) return fill_arg(a, *v);
    a.type = "optional";
  } else if constexpr (HasLogValue<U>) {
    return fill_arg(a, mate_log_value(v));
  } else if constexpr (std::ranges::range<U>) {
    a.kind = Arg::Kind::List;
    a.type = "list";
    for (const auto& item : v) {
      Arg& it = a.items.emplace_back();
      fill_arg(it, item);
      it.name = "[" + std::to_string(a.items.size() - 1) + "]";
    }
  } else {
    static_assert(sizeof(U) == 0,
                  "MATE_API cannot log this argument type: pass a tensor (DLTensor, TensorView), "
                  "scalar, string, enum, optional or range of these, or define "
                  "mate_log_value(const T&) for it");
  }
}

template <class T>
Arg to_arg(const T& v) {
  Arg a;
  fill_arg(a, v);
  return a;
}

}  // namespace detail

class ArgList {
 public:
  template <class T>
  void add(std::string_view name, const T& value) {
    if (args_.capacity() == 0) args_.reserve(8);  // one allocation for a call's usual arguments
    Arg& a = args_.emplace_back();
    try {
      a.name = std::string(name);
      detail::fill_arg(a, value);
    } catch (...) {
      args_.pop_back();  // never a half-described argument in the list
      throw;
    }
  }
  void reserve(std::size_t n) { args_.reserve(n); }
  template <class T>
  void add(std::string_view /*spelled*/, const Named<T>& named) {
    add(named.name, named.value);
  }
  void push_back(Arg a) { args_.push_back(std::move(a)); }
  const std::vector<Arg>& args() const noexcept { return args_; }
  std::vector<Arg>& args() noexcept { return args_; }

 private:
  std::vector<Arg> args_;
};

}  // namespace mate::log
