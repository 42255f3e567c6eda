#include "torch_pickle.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <variant>

namespace mate::dump::detail {

namespace {

// Pickle opcodes (Python's Lib/pickle.py) used by torch.save's tensors.
enum Op : unsigned char {
  MARK = '(', STOP = '.', BININT = 'J', BININT1 = 'K', BININT2 = 'M', NONE = 'N', BINPERSID = 'Q', REDUCE = 'R',
  BINUNICODE = 'X', EMPTY_DICT = '}', EMPTY_LIST = ']', EMPTY_TUPLE = ')', GLOBAL = 'c', BINGET = 'h', LONG_BINGET = 'j',
  BINPUT = 'q', LONG_BINPUT = 'r', TUPLE = 't', SETITEMS = 'u',
  PROTO = 0x80, TUPLE1 = 0x85, TUPLE2 = 0x86, TUPLE3 = 0x87, NEWTRUE = 0x88, NEWFALSE = 0x89, LONG1 = 0x8a,
  SHORT_BINUNICODE = 0x8c, MEMOIZE = 0x94, FRAME = 0x95,
};

constexpr std::pair<DLDataType, const char*> kStorageTypes[] = {
    {{kDLFloat, 64, 1}, "DoubleStorage"},  {{kDLFloat, 32, 1}, "FloatStorage"},  {{kDLFloat, 16, 1}, "HalfStorage"},
    {{kDLBfloat, 16, 1}, "BFloat16Storage"}, {{kDLInt, 8, 1}, "CharStorage"},    {{kDLInt, 16, 1}, "ShortStorage"},
    {{kDLInt, 32, 1}, "IntStorage"},       {{kDLInt, 64, 1}, "LongStorage"},     {{kDLUInt, 8, 1}, "ByteStorage"},
    {{6, 8, 1}, "BoolStorage"},  // DLPack 1.x kDLBool (mate/tensor/dtype.hpp)
    {{5, 64, 1}, "ComplexFloatStorage"},   {{5, 128, 1}, "ComplexDoubleStorage"},  // kDLComplex
};

// --- writing ---

void op(std::string& s, unsigned char c) { s.push_back(static_cast<char>(c)); }

void put_int(std::string& s, std::int64_t v) {
  if (v >= 0 && v < 256) {
    op(s, BININT1);
    op(s, static_cast<unsigned char>(v));
  } else if (v >= 0 && v < 65536) {
    op(s, BININT2);
    op(s, static_cast<unsigned char>(v & 0xff));
    op(s, static_cast<unsigned char>(v >> 8));
  } else if (v >= INT32_MIN && v <= INT32_MAX) {
    op(s, BININT);
    for (int i = 0; i < 4; ++i) op(s, static_cast<unsigned char>((static_cast<std::uint32_t>(v) >> (8 * i)) & 0xff));
  } else {
    // LONG1: little-endian two's complement, 8 bytes (Python's decode_long).
    op(s, LONG1);
    op(s, 8);
    for (int i = 0; i < 8; ++i) op(s, static_cast<unsigned char>((static_cast<std::uint64_t>(v) >> (8 * i)) & 0xff));
  }
}

void put_str(std::string& s, std::string_view text) {
  op(s, BINUNICODE);
  for (int i = 0; i < 4; ++i) op(s, static_cast<unsigned char>((text.size() >> (8 * i)) & 0xff));
  s.append(text);
}

void put_global(std::string& s, std::string_view module, std::string_view name) {
  op(s, GLOBAL);
  s.append(module).append("\n").append(name).append("\n");
}

void put_tuple(std::string& s, const std::vector<std::int64_t>& v) {
  if (v.empty()) return op(s, EMPTY_TUPLE);
  op(s, MARK);
  for (std::int64_t x : v) put_int(s, x);
  op(s, TUPLE);
}

// --- reading ---

struct Global {
  std::string module, name;
};
struct Storage {
  std::string type, key, location;
  std::int64_t numel = 0;
};
struct OrderedDict {
  bool empty = true;
};
struct Dict {
  bool empty = true;
};
struct Mark {};
struct Value;
using Tuple = std::shared_ptr<const std::vector<Value>>;  // shared: memo copies stay cheap
struct Value {
  std::variant<std::monostate, bool, std::int64_t, std::string, Tuple, Global, Storage, OrderedDict, Dict, PickledTensor> v;
  int depth = 0;  // tuples nested in it (bounded: destroying a deep nest would recurse as deep)
};

constexpr int kMaxNesting = 16;

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}

  PickledTensor run() {
    while (true) {
      const unsigned char c = byte();
      switch (c) {
        case PROTO: {
          const unsigned char p = byte();
          if (p < 2 || p > 5) fail("unsupported pickle protocol " + std::to_string(p));
          break;
        }
        case FRAME: (void)bytes(8); break;  // protocol 4 framing: a length hint
        case MARK:
          if (marks_.size() >= kMaxNesting) fail("MARKs nested deeper than " + std::to_string(kMaxNesting));
          marks_.push_back(stack_.size());
          break;
        case STOP: {
          if (stack_.size() != 1 || !marks_.empty()) fail("the pickle ends with " + std::to_string(stack_.size()) + " values on its stack");
          auto* t = std::get_if<PickledTensor>(&stack_.back().v);
          if (t == nullptr) fail("the pickle holds " + describe(stack_.back()) + ", not a tensor");
          if (pos_ != in_.size()) fail("bytes after the pickle's STOP");
          return *t;
        }
        case NONE: push({std::monostate{}}); break;
        case NEWTRUE: push({true}); break;
        case NEWFALSE: push({false}); break;
        case BININT1: push({static_cast<std::int64_t>(byte())}); break;
        case BININT2: push({static_cast<std::int64_t>(le(2))}); break;
        case BININT: push({static_cast<std::int64_t>(static_cast<std::int32_t>(le(4)))}); break;
        case LONG1: {
          const unsigned char n = byte();
          if (n > 8) fail("integer of " + std::to_string(n) + " bytes (at most 8 accepted)");
          std::uint64_t v = n == 0 ? 0 : le(n);
          if (n > 0 && n < 8 && (v >> (8 * n - 1)) != 0) v |= ~std::uint64_t{0} << (8 * n);  // sign-extend
          push({static_cast<std::int64_t>(v)});
          break;
        }
        case BINUNICODE: push({std::string(bytes(le(4)))}); break;
        case SHORT_BINUNICODE: push({std::string(bytes(byte()))}); break;
        case GLOBAL: {
          std::string module(line()), name(line());
          push({Global{std::move(module), std::move(name)}});
          break;
        }
        case EMPTY_TUPLE: push({std::make_shared<const std::vector<Value>>()}); break;
        case TUPLE1: case TUPLE2: case TUPLE3: {
          const std::size_t n = c - TUPLE1 + 1;
          if (stack_.size() < n + floor()) fail("tuple opcode on too short a stack");
          auto items = std::make_shared<std::vector<Value>>(stack_.end() - static_cast<std::ptrdiff_t>(n), stack_.end());
          stack_.resize(stack_.size() - n);
          push_tuple(std::move(items));
          break;
        }
        case TUPLE: {
          const std::size_t m = pop_mark();
          auto items = std::make_shared<std::vector<Value>>(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
          stack_.resize(m);
          push_tuple(std::move(items));
          break;
        }
        case EMPTY_DICT: push({Dict{}}); break;
        case SETITEMS: {
          const std::size_t m = pop_mark();
          if (m == 0 || m <= floor()) fail("SETITEMS without a dict");
          const bool added = stack_.size() > m;
          stack_.resize(m);
          Value& target = stack_.back();
          if (auto* d = std::get_if<Dict>(&target.v)) d->empty = d->empty && !added;
          else if (auto* o = std::get_if<OrderedDict>(&target.v)) o->empty = o->empty && !added;
          else fail("SETITEMS on " + describe(target));
          break;
        }
        case BINPUT: memo(byte()); break;
        case LONG_BINPUT: memo(le(4)); break;
        case MEMOIZE: memo(memo_.size()); break;
        case BINGET: recall(byte()); break;
        case LONG_BINGET: recall(le(4)); break;
        case BINPERSID: persistent(); break;
        case REDUCE: reduce(); break;
        default: fail("unsupported pickle opcode 0x" + hex(c));
      }
    }
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw PickleError("data.pkl: " + why + " (at byte " + std::to_string(pos_) + ")");
  }
  static std::string hex(unsigned char c) {
    const char* d = "0123456789abcdef";
    return {d[c >> 4], d[c & 15]};
  }
  unsigned char byte() {
    if (pos_ >= in_.size()) fail("truncated pickle (no STOP)");
    return static_cast<unsigned char>(in_[pos_++]);
  }
  std::string_view bytes(std::uint64_t n) {
    if (n > in_.size() - pos_) fail("truncated pickle");
    const std::string_view out = in_.substr(pos_, static_cast<std::size_t>(n));
    pos_ += static_cast<std::size_t>(n);
    return out;
  }
  std::uint64_t le(int n) {
    const std::string_view b = bytes(static_cast<std::uint64_t>(n));
    std::uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[static_cast<std::size_t>(i)]);
    return v;
  }
  std::string_view line() {
    const std::size_t nl = in_.find('\n', pos_);
    if (nl == std::string_view::npos || nl - pos_ > 256) fail("GLOBAL without a short line");
    const std::string_view out = in_.substr(pos_, nl - pos_);
    pos_ = nl + 1;
    return out;
  }
  std::size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }
  void push(Value v) {
    if (stack_.size() >= 4096) fail("more than 4096 values on the pickle's stack");
    stack_.push_back(std::move(v));
  }
  void push_tuple(std::shared_ptr<std::vector<Value>> items) {
    int depth = 0;
    for (const Value& x : *items) depth = std::max(depth, x.depth);
    if (depth + 1 > kMaxNesting) fail("tuples nested deeper than " + std::to_string(kMaxNesting));
    Value v{Tuple(std::move(items))};
    v.depth = depth + 1;
    push(std::move(v));
  }
  Value pop() {
    if (stack_.size() <= floor()) fail("pop from an empty stack");
    Value v = std::move(stack_.back());
    stack_.pop_back();
    return v;
  }
  std::size_t pop_mark() {
    if (marks_.empty()) fail("no MARK to end");
    const std::size_t m = marks_.back();
    marks_.pop_back();
    return m;
  }
  void memo(std::uint64_t index) {
    if (stack_.size() <= floor()) fail("memo of an empty stack");
    if (index > 4096) fail("memo index " + std::to_string(index) + " above 4096");
    memo_[index] = stack_.back();
  }
  void recall(std::uint64_t index) {
    auto it = memo_.find(index);
    if (it == memo_.end()) fail("memo " + std::to_string(index) + " was never stored");
    push(it->second);
  }
  static std::string describe(const Value& v) {
    switch (v.v.index()) {
      case 0: return "None";
      case 1: return "a bool";
      case 2: return "an integer";
      case 3: return "a string";
      case 4: return "a tuple";
      case 5: {
        const Global& g = std::get<Global>(v.v);
        return g.module + "." + g.name;
      }
      case 6: return "a storage";
      case 7: return "an OrderedDict";
      case 8: return "a dict";
      default: return "a tensor";
    }
  }
  static const std::vector<Value>* tuple_of(const Value& v) {
    const Tuple* t = std::get_if<Tuple>(&v.v);
    return t == nullptr ? nullptr : t->get();
  }
  std::vector<std::int64_t> ints(const Value& v, const char* what) const {
    const std::vector<Value>* t = tuple_of(v);
    if (t == nullptr) fail(std::string(what) + " is not a tuple");
    if (t->size() > 64) fail(std::string(what) + " has " + std::to_string(t->size()) + " dimensions (at most 64)");
    std::vector<std::int64_t> out;
    for (const Value& x : *t) {
      const std::int64_t* i = std::get_if<std::int64_t>(&x.v);
      if (i == nullptr) fail(std::string(what) + " holds " + describe(x) + ", not an integer");
      out.push_back(*i);
    }
    return out;
  }
  const std::string& str(const Value& v, const char* what) const {
    const std::string* s = std::get_if<std::string>(&v.v);
    if (s == nullptr) fail(std::string(what) + " is " + describe(v) + ", not a string");
    return *s;
  }
  // ('storage', torch.<Type>Storage, key, location, numel)
  void persistent() {
    const Value id = pop();
    const std::vector<Value>* t = tuple_of(id);
    if (t == nullptr || t->size() != 5) fail("persistent id is not a 5-tuple ('storage', type, key, location, numel)");
    if (str((*t)[0], "persistent id kind") != "storage") fail("persistent id is not a storage");
    const Global* type = std::get_if<Global>(&(*t)[1].v);
    if (type == nullptr || type->module != "torch" || !dtype_of_storage_type(type->name))
      fail("storage type " + describe((*t)[1]) + " is not a torch storage class MATE reads");
    const std::int64_t* numel = std::get_if<std::int64_t>(&(*t)[4].v);
    if (numel == nullptr || *numel < 0) fail("storage size is not an integer >= 0");
    push({Storage{type->name, str((*t)[2], "storage key"), str((*t)[3], "storage location"), *numel}});
  }
  void reduce() {
    const Value args = pop();
    if (stack_.size() <= floor()) fail("REDUCE without a function");
    Value& fn = stack_.back();
    const Global* g = std::get_if<Global>(&fn.v);
    const std::vector<Value>* a = tuple_of(args);
    if (g == nullptr || a == nullptr) fail("REDUCE of " + describe(fn) + " with " + describe(args));
    if (g->module == "collections" && g->name == "OrderedDict") {
      if (!a->empty()) fail("OrderedDict with arguments");
      fn = {OrderedDict{}};
      return;
    }
    if (g->module != "torch._utils" || g->name != "_rebuild_tensor_v2")
      fail("calls " + g->module + "." + g->name + " (only torch._utils._rebuild_tensor_v2 is read: one tensor per file)");
    // (storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata])
    if (a->size() != 6 && a->size() != 7) fail("_rebuild_tensor_v2 with " + std::to_string(a->size()) + " arguments");
    const Storage* s = std::get_if<Storage>(&(*a)[0].v);
    if (s == nullptr) fail("_rebuild_tensor_v2's storage is " + describe((*a)[0]));
    const std::int64_t* offset = std::get_if<std::int64_t>(&(*a)[1].v);
    if (offset == nullptr || *offset < 0) fail("storage offset is not an integer >= 0");
    const OrderedDict* hooks = std::get_if<OrderedDict>(&(*a)[5].v);
    if (hooks == nullptr || !hooks->empty) fail("backward hooks are not an empty OrderedDict");
    if (a->size() == 7) {
      const Value& meta = (*a)[6];
      const Dict* d = std::get_if<Dict>(&meta.v);
      if (!std::holds_alternative<std::monostate>(meta.v) && (d == nullptr || !d->empty))
        fail("tensor metadata (conjugate or negative bits) is not supported");
    }
    PickledTensor t;
    t.storage_type = s->type;
    t.key = s->key;
    t.location = s->location;
    t.storage_numel = static_cast<std::uint64_t>(s->numel);
    t.storage_offset = *offset;
    t.size = ints((*a)[2], "size");
    t.stride = ints((*a)[3], "stride");
    if (t.size.size() != t.stride.size()) fail("size and stride have different lengths");
    fn = {std::move(t)};
  }

  std::string_view in_;
  std::size_t pos_ = 0;
  std::vector<Value> stack_;
  std::vector<std::size_t> marks_;
  std::map<std::uint64_t, Value> memo_;
};

}  // namespace

std::string pickle_tensor(const PickledTensor& t) {
  std::string s;
  op(s, PROTO);
  op(s, 2);
  put_global(s, "torch._utils", "_rebuild_tensor_v2");
  op(s, MARK);
  op(s, MARK);
  put_str(s, "storage");
  put_global(s, "torch", t.storage_type);
  put_str(s, t.key);
  put_str(s, t.location);
  put_int(s, static_cast<std::int64_t>(t.storage_numel));
  op(s, TUPLE);
  op(s, BINPERSID);
  put_int(s, t.storage_offset);
  put_tuple(s, t.size);
  put_tuple(s, t.stride);
  op(s, NEWFALSE);
  put_global(s, "collections", "OrderedDict");
  op(s, EMPTY_TUPLE);
  op(s, REDUCE);
  op(s, TUPLE);
  op(s, REDUCE);
  op(s, STOP);
  return s;
}

PickledTensor unpickle_tensor(std::string_view pickle) { return Reader(pickle).run(); }

std::optional<std::string> torch_storage_type(DLDataType t) {
  for (const auto& [dtype, name] : kStorageTypes)
    if (dtype.code == t.code && dtype.bits == t.bits && dtype.lanes == t.lanes) return std::string(name);
  return std::nullopt;
}

std::optional<DLDataType> dtype_of_storage_type(std::string_view storage_type) {
  for (const auto& [dtype, name] : kStorageTypes)
    if (storage_type == name) return dtype;
  return std::nullopt;
}

}  // namespace mate::dump::detail
