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

// "i8" .. "i128", "u8" .. "u128": an integer type's name as logged.
const char* int_type_name(bool is_signed, std::size_t bytes) noexcept;

// The one dispatch from an argument's C++ type to what is logged of it. `to` is a writer of
// values: ArgFiller (below: fills an Arg) or TextWriter (renders the text format's lines
// straight from the value, no Arg built), so both show the same thing for every type.
template <class To, class T>
void describe(To& to, const T& v) {
  using U = std::remove_cvref_t<T>;
  if constexpr (std::is_same_v<U, tensor::TensorView>) {
    to.tensor(v.dl());
  } else if constexpr (std::is_same_v<U, DLTensor>) {
    to.tensor(v);
  } else if constexpr (std::is_same_v<U, DLTensor*> || std::is_same_v<U, const DLTensor*>) {
    if (v != nullptr) to.tensor(*v);
    else to.none("tensor");
  } else if constexpr (std::is_same_v<U, DLManagedTensor*> || std::is_same_v<U, const DLManagedTensor*>) {
    if (v != nullptr) to.tensor(v->dl_tensor);
    else to.none("tensor");
  } else if constexpr (std::is_same_v<U, bool>) {
    to.boolean(v);
  } else if constexpr (std::is_enum_v<U>) {
    if constexpr (HasToString<U>) to.enumeration(static_cast<std::int64_t>(v), std::string_view(to_string(v)));
    else to.enumeration(static_cast<std::int64_t>(v), std::string_view());
  } else if constexpr (std::is_integral_v<U> && std::is_signed_v<U>) {
    to.integer(int_type_name(true, sizeof(U)), static_cast<std::int64_t>(v));
  } else if constexpr (std::is_integral_v<U>) {
    to.unsigned_integer(int_type_name(false, sizeof(U)), static_cast<std::uint64_t>(v));
  } else if constexpr (std::is_floating_point_v<U>) {
    to.floating(sizeof(U) == 4, static_cast<double>(v));
  } else if constexpr (std::is_convertible_v<const U&, std::string_view> && !std::is_same_v<U, std::nullptr_t>) {
    if constexpr (std::is_pointer_v<std::decay_t<U>>) {
      if (v == nullptr) return to.none("str");
    }
    to.string(std::string_view(v));
  } else if constexpr (std::is_same_v<U, std::nullopt_t> || std::is_same_v<U, std::nullptr_t>) {
    to.none("optional");
  } else if constexpr (is_optional<U>::value) {
    if (v.has_value()) describe(to, *v);
    else to.none("optional");
  } else if constexpr (HasLogValue<U>) {
    describe(to, mate_log_value(v));
  } else if constexpr (std::ranges::forward_range<const U>) {
    // The count comes first in the text form; a forward range can be walked twice.
    to.list(static_cast<std::size_t>(std::ranges::distance(v)));
    std::size_t i = 0;
    for (const auto& item : v) {
      if (to.gave_up()) return;  // the rest would be thrown away
      auto each = to.item(i++);
      describe(each, item);
    }
  } else {
    static_assert(sizeof(U) == 0,
                  "MATE_API cannot log this argument type: pass a tensor (DLTensor, TensorView), "
                  "scalar, string, enum, optional or range of these, or define "
                  "mate_log_value(const T&) for it");
  }
}

// Describes a value in an Arg: in place, since an Arg is large to move and a logged call makes
// one per argument (the Arg is default-constructed, its name aside).
class ArgFiller {
 public:
  explicit ArgFiller(Arg& a) noexcept : a_(&a) {}
  void tensor(const DLTensor& t) {
    a_->kind = Arg::Kind::Tensor;
    a_->type = "tensor";
    a_->tensor.emplace(t);
  }
  void none(const char* what) { a_->type = what; }
  void boolean(bool v) {
    a_->kind = Arg::Kind::Bool;
    a_->type = "bool";
    a_->bool_value = v;
  }
  void enumeration(std::int64_t value, std::string_view label) {
    a_->kind = Arg::Kind::Enum;
    a_->type = "enum";
    a_->int_value = value;
    a_->text = std::string(label);
  }
  void integer(const char* type, std::int64_t v) {
    a_->kind = Arg::Kind::Int;
    a_->type = type;
    a_->int_value = v;
  }
  void unsigned_integer(const char* type, std::uint64_t v) {
    a_->kind = Arg::Kind::UInt;
    a_->type = type;
    a_->uint_value = v;
  }
  void floating(bool f32, double v) {
    a_->kind = Arg::Kind::Float;
    a_->type = f32 ? "f32" : "f64";
    a_->float_value = v;
  }
  void string(std::string_view v) {
    a_->kind = Arg::Kind::String;
    a_->type = "str";
    a_->text = std::string(v);
  }
  void list(std::size_t n) {
    a_->kind = Arg::Kind::List;
    a_->type = "list";
    a_->items.reserve(n);
  }
  ArgFiller item(std::size_t i) {
    Arg& it = a_->items.emplace_back();
    it.name = "[" + std::to_string(i) + "]";
    return ArgFiller(it);
  }
  static constexpr bool gave_up() noexcept { return false; }

 private:
  Arg* a_;
};

template <class T>
void fill_arg(Arg& a, const T& v) {
  ArgFiller to(a);
  describe(to, v);
}

template <class T>
Arg to_arg(const T& v) {
  Arg a;
  fill_arg(a, v);
  return a;
}

// A text record being rendered (src/log/log_internal.hpp): the buffer, the level, and whether it
// gave up (see TextWriter::tensor).
class TextRecord;
// True once `record` gave up: the caller renders it again from an Arg list.
bool gave_up(const TextRecord& record) noexcept;

// Writes one argument into a text record as the text format's lines: the same lines a record
// rendered from the argument's Arg has (those are rendered through this class too).
class TextWriter {
 public:
  // Starts the line of argument `name` at `depth` (1 for an argument, 2 for a list's item, ...).
  TextWriter(TextRecord& record, std::string_view name, int depth = 1);
  void tensor(const DLTensor& t);
  void none(const char* what);
  void boolean(bool v);
  void enumeration(std::int64_t value, std::string_view label);  // label "": no to_string
  void integer(const char* type, std::int64_t v);
  void unsigned_integer(const char* type, std::uint64_t v);
  void floating(bool f32, double v);
  void string(std::string_view v);
  void list(std::size_t n);
  TextWriter item(std::size_t i);
  bool gave_up() const noexcept;  // the record gave up (see TextRecord)

 private:
  TextRecord* record_;
  int depth_;
};

// The same for an Arg (from Python, or kept from before).
void write_text_arg(TextRecord& record, const Arg& a);

template <class T>
void write_text(TextRecord& record, std::string_view name, const T& v) {
  if (gave_up(record)) return;
  TextWriter to(record, name);
  describe(to, v);
}

}  // namespace detail

class ArgList {
 public:
  ArgList() = default;
  // A list that renders what is added into `record` instead of keeping it (the text format's
  // fast path: no Arg is built).
  explicit ArgList(detail::TextRecord& record) noexcept : text_(&record) {}

  template <class T>
  void add(std::string_view name, const T& value) {
    if (text_ != nullptr) return detail::write_text(*text_, name, value);
    std::vector<Arg>& list = args();
    if (list.capacity() == 0) list.reserve(8);  // one allocation for a call's usual arguments
    Arg& a = list.emplace_back();
    try {
      a.name = std::string(name);
      detail::fill_arg(a, value);
    } catch (...) {
      list.pop_back();  // never a half-described argument in the list
      throw;
    }
  }
  void reserve(std::size_t n) {
    if (text_ == nullptr) args().reserve(n);
  }
  template <class T>
  void add(std::string_view /*spelled*/, const Named<T>& named) {
    add(named.name, named.value);
  }
  // In text mode the Arg is only read: a collector that moves its Args in (Python's) can be run
  // again when the record gives up.
  void push_back(Arg&& a) {
    if (text_ != nullptr) return detail::write_text_arg(*text_, a);
    args().push_back(std::move(a));
  }
  void push_back(const Arg& a) {
    if (text_ != nullptr) return detail::write_text_arg(*text_, a);
    args().push_back(a);
  }
  const std::vector<Arg>& args() const noexcept {
    // One empty list for all (never destroyed: calls may run during exit).
    static const std::vector<Arg>& kNone = *new const std::vector<Arg>();
    return args_ ? *args_ : kNone;
  }
  std::vector<Arg>& args() noexcept {
    if (!args_) args_.emplace();
    return *args_;
  }

 private:
  // Made on first use: a list in text mode, or one never filled (a call's inputs on the text
  // fast path), then ends without calling a vector's destructor (out of line: Arg's is large).
  std::optional<std::vector<Arg>> args_;
  detail::TextRecord* text_ = nullptr;
};

}  // namespace mate::log
