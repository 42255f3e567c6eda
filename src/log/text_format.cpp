// The text format's records: the header line, then one line per argument (TextWriter), whether
// the argument comes as a C++ value (ArgList in text mode: no Arg is built) or as an Arg (the
// general path, Python's arguments). docs/logging.md shows the format.
//
// Rendering is most of a call's cost after the write(2) itself, so a record is built piece by
// piece in the caller's RecordBuffer (no temporary strings, no format strings parsed), which the
// sink writes as it is; a line of bounded length (the header, a tensor, an argument's name, the
// statistics) through one room() reservation and a local pointer, advanced once.
#include <fmt/compile.h>
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstring>

#include "log_internal.hpp"
#include "number_text.hpp"
#include "mate/core/digit_pairs.hpp"
#include "mate/core/initial_exec_tls.hpp"
#include "mate/core/utc_time.hpp"
#include "mate/tensor/stats.hpp"

namespace mate::log::detail {

namespace {

void put(RecordBuffer& out, std::string_view s) { out.append(s); }
void put(RecordBuffer& out, char c) { out.push_back(c); }

// A string from the program as the text format shows it: control characters, backslashes and
// (inside quotes) double quotes escaped as in JSON, so that no value can start a line that looks
// like a record of its own. Other bytes, UTF-8 included, are kept.
constexpr bool needs_escape(char c, bool quoted) {
  return static_cast<unsigned char>(c) < 0x20 || c == 0x7f || c == '\\' || (quoted && c == '"');
}

// needs_escape(c, false) for each byte: one load a character where the comparisons were three
// (an argument's name is checked on every line).
inline constexpr struct EscapeTable {
  bool unquoted[256];
} kEscape = [] {
  EscapeTable t{};
  for (int c = 0; c < 256; ++c) t.unquoted[c] = needs_escape(static_cast<char>(c), false);
  return t;
}();

bool plain_name(std::string_view name) noexcept {
  for (char c : name)
    if (kEscape.unquoted[static_cast<unsigned char>(c)]) return false;
  return true;
}

void append_escaped(RecordBuffer& out, std::string_view s, bool quoted) {
  if (quoted) put(out, '"');
  // Most names and values need no escape: the part before the first that does goes in at once.
  std::size_t plain = 0;
  while (plain < s.size() && !needs_escape(s[plain], quoted)) ++plain;
  put(out, s.substr(0, plain));
  s.remove_prefix(plain);
  for (char c : s) {
    switch (c) {
      case '"': put(out, quoted ? "\\\"" : "\""); break;
      case '\\': put(out, "\\\\"); break;
      case '\n': put(out, "\\n"); break;
      case '\r': put(out, "\\r"); break;
      case '\t': put(out, "\\t"); break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          const char hex[] = "0123456789abcdef";
          const auto u = static_cast<unsigned char>(c);
          const char escaped[6] = {'\\', 'u', '0', '0', hex[u >> 4], hex[u & 15]};
          out.append(escaped, sizeof escaped);
        } else {
          put(out, c);
        }
    }
  }
  if (quoted) put(out, '"');
}

// An integer in decimal, straight into the buffer.
template <class Int>
void append_int(RecordBuffer& out, Int v) {
  constexpr std::size_t kMost = 24;  // INT64_MIN: 20 characters
  char* const start = out.room(kMost);
  out.advance(static_cast<std::size_t>(std::to_chars(start, start + kMost, v).ptr - start));
}

// A line of bounded length written into room reserved once (RecordBuffer::room) through a local
// pointer, then one advance(): appending piece by piece re-reads the buffer's size and capacity
// after every store (a char store may alias them).
struct Line {
  char* p;
  void text(std::string_view s) noexcept {
    copy_short(p, s.data(), s.size());
    p += s.size();
  }
  template <class Int>
  void number(Int v) noexcept {
    // Below 100 (most dimensions and strides of small tensors, a stride of 1) by one table
    // lookup: to_chars first counts the digits, ~20 instructions for "16".
    if (v >= 0 && v < 10) {
      *p++ = static_cast<char>('0' + v);
    } else if (v >= 10 && v < 100) {
      core::write_two_digits(p, static_cast<unsigned>(v));
      p += 2;
    } else {
      p = std::to_chars(p, p + 24, v).ptr;  // 20 characters at most
    }
  }
};

void append_indent(RecordBuffer& out, int depth) {
  static constexpr char kSpaces[] = "                                ";
  constexpr std::size_t kMost = sizeof kSpaces - 1;
  std::size_t n = 2 * static_cast<std::size_t>(depth);
  while (n > 0) {
    // A fixed-size copy (inlined), of which `step` bytes are kept.
    const std::size_t step = std::min(n, kMost);
    std::memcpy(out.room(kMost), kSpaces, kMost);
    out.advance(step);
    n -= step;
  }
}

void text_stats(RecordBuffer& out, const tensor::TensorView& v, const tensor::Layout& layout, int depth) {
  tensor::StatsOptions options;
  options.layout = &layout;
  tensor::StatsResult r = tensor::compute_stats(v, options);
  append_indent(out, depth + 1);
  if (!r.stats) {
    put(out, r.unavailable);
    put(out, '\n');
    return;
  }
  const tensor::Stats& s = *r.stats;
  char* const start = out.room(sizeof "stats: min  max  mean  nan  inf \n" + 3 * kGeneral6Max + 2 * 24);
  Line line{start};
  line.text("stats:");
  if (s.finite > 0) {
    line.text(" min ");
    line.p = write_general6(s.min, line.p);
    line.text(" max ");
    line.p = write_general6(s.max, line.p);
    line.text(" mean ");
    line.p = write_general6(s.mean, line.p);
  } else {
    line.text(" no finite values");
  }
  if (s.floating) {
    line.text(" nan ");
    line.number(s.nan);
    line.text(" inf ");
    line.number(s.inf);
  }
  line.text("\n");
  out.advance(static_cast<std::size_t>(line.p - start));
}

}  // namespace

bool gave_up(const TextRecord& record) noexcept { return record.gave_up; }

TextWriter::TextWriter(TextRecord& record, std::string_view name, int depth) : record_(&record), depth_(depth) {
  RecordBuffer& out = *record.out;
  const bool plain = plain_name(name);
  if (plain && static_cast<unsigned>(depth) <= 16) {  // the common case, in one piece: indent, name, ": "
    constexpr std::size_t kIndentMost = 32;
    const auto indent = static_cast<std::size_t>(2 * depth);
    char* const p = out.room(kIndentMost + name.size() + 2);
    std::memset(p, ' ', kIndentMost);  // a fixed-size fill, of which `indent` bytes are kept
    copy_short(p + indent, name.data(), name.size());
    std::memcpy(p + indent + name.size(), ": ", 2);
    out.advance(indent + name.size() + 2);
    return;
  }
  append_indent(out, depth);
  append_escaped(out, name, false);
  put(out, ": ");
}

void TextWriter::none(const char* what) {
  RecordBuffer& out = *record_->out;
  put(out, "None (");
  put(out, std::string_view(what));
  put(out, ")\n");
}

void TextWriter::boolean(bool v) { put(*record_->out, v ? "bool true\n" : "bool false\n"); }

void TextWriter::enumeration(std::int64_t value, std::string_view label) {
  RecordBuffer& out = *record_->out;
  put(out, "enum ");
  if (label.empty()) {
    append_int(out, value);
  } else {
    append_escaped(out, label, false);
    put(out, " (");
    append_int(out, value);
    put(out, ')');
  }
  put(out, '\n');
}

namespace {

// "<type> <value>\n", e.g. "i32 -7".
template <class Int>
void typed_int(RecordBuffer& out, const char* type, Int v) {
  put(out, std::string_view(type));
  put(out, ' ');
  append_int(out, v);
  put(out, '\n');
}

}  // namespace

void TextWriter::integer(const char* type, std::int64_t v) { typed_int(*record_->out, type, v); }

void TextWriter::unsigned_integer(const char* type, std::uint64_t v) { typed_int(*record_->out, type, v); }

void TextWriter::floating(bool f32, double v) {
  // The shortest text that reads back as the same value of the argument's own type.
  RecordBuffer& out = *record_->out;
  constexpr std::size_t kMost = 64;  // "f64 -1.2345678901234567e-308\n" is 29
  char* const start = out.room(kMost);
  std::memcpy(start, f32 ? "f32 " : "f64 ", 4);
  // Integers and short multiples of 1/16 (alpha 1, beta 0, a scale of 0.125) without fmt's
  // general shortest-digits search, ~4x the time.
  char* end = write_exact_short(v, start + 4);
  if (end == nullptr)
    end = f32 ? fmt::format_to(start + 4, FMT_COMPILE("{}"), static_cast<float>(v))
              : fmt::format_to(start + 4, FMT_COMPILE("{}"), v);
  *end++ = '\n';
  out.advance(static_cast<std::size_t>(end - start));
}

void TextWriter::string(std::string_view v) {
  RecordBuffer& out = *record_->out;
  put(out, "str ");
  append_escaped(out, v, true);
  put(out, '\n');
}

void TextWriter::list(std::size_t n) {
  RecordBuffer& out = *record_->out;
  put(out, "list of ");
  append_int(out, n);
  put(out, '\n');
}

bool TextWriter::gave_up() const noexcept { return record_->gave_up; }

TextWriter TextWriter::item(std::size_t i) {
  char name[32] = "[";
  const auto r = std::to_chars(name + 1, name + sizeof name - 1, i);
  *r.ptr = ']';
  return TextWriter(*record_, std::string_view(name, static_cast<std::size_t>(r.ptr + 1 - name)), depth_ + 1);
}

void TextWriter::tensor(const DLTensor& t) {
  TextRecord& record = *record_;
  RecordBuffer& out = *record.out;
  const tensor::TensorView v(t);
  const tensor::Memory memory = v.memory();
  const bool device_memory = memory != tensor::Memory::Host && memory != tensor::Memory::Other;
  if (record.device_stats_unchecked && record.level >= 5 && device_memory) {
    record.gave_up = true;  // see TextRecord
    return;
  }
  const tensor::Layout layout = v.layout();
  const tensor::VaRange va = v.va_range(layout.extent);
  if (record.ranges != nullptr && t.device.device_type != kDLCPU && t.data != nullptr && layout.error == nullptr) {
    DeviceRanges& ranges = *record.ranges;
    if (ranges.count == DeviceRanges::kMax) {
      record.gave_up = true;
      return;
    }
    ranges.lo[ranges.count] = va.lo;
    ranges.hi[ranges.count] = va.hi;
    ++ranges.count;
  }
  const tensor::ScalarType type = v.scalar_type();
  std::string unusual_dtype, unusual_device;  // names built only for what the fast cases lack
  if (type == tensor::ScalarType::Unsupported) unusual_dtype = tensor::dtype_name(v.dtype());
  if (v.device().device_type != kDLCPU) unusual_device = tensor::device_name(v.device());
  const std::string_view dtype = unusual_dtype.empty() ? tensor::scalar_type_name(type) : unusual_dtype;
  const std::string_view device = unusual_device.empty() ? tensor::kCpuDeviceName : unusual_device;
  const int dims = v.has_dims() ? v.ndim() : 0;
  // "tensor " dtype " [" dims "] strides [" dims "]" " byte_offset " N " " device, then the longest
  // ending: " invalid layout (" why "): data " 0x.. ", nothing read\n", or the range's.
  char* const start = out.room(160 + dtype.size() + device.size() + 2 * 22 * static_cast<std::size_t>(dims) +
                               (layout.error != nullptr ? std::strlen(layout.error) : 0));
  Line line{start};
  line.text("tensor ");
  line.text(dtype);
  if (v.has_dims()) {
    line.text(" [");
    for (int i = 0; i < dims; ++i) {
      if (i > 0) line.text(", ");
      line.number(v.shape(i));
    }
    line.text("] strides [");
    for (int i = 0; i < dims; ++i) {
      if (i > 0) line.text(", ");
      line.number(v.stride(i));
    }
    line.text("]");
  } else {
    line.text(" ndim ");
    line.number(v.ndim());
  }
  if (v.byte_offset() != 0) {
    line.text(" byte_offset ");
    line.number(v.byte_offset());
  }
  line.text(" ");
  line.text(device);
  if (layout.error != nullptr) {  // no range, no statistics: nothing is read through it
    line.text(" invalid layout (");
    line.text(std::string_view(layout.error));
    line.text("): data ");
    line.p = write_address(reinterpret_cast<std::uintptr_t>(t.data), line.p);
    line.text(", nothing read\n");
    out.advance(static_cast<std::size_t>(line.p - start));
    return;
  }
  line.text(v.is_contiguous(layout) ? " contiguous va [" : " non-contiguous va [");
  line.p = write_address(va.lo, line.p);
  line.text(", ");
  line.p = write_address(va.hi, line.p);
  line.text(") ");
  line.number(va.size());
  line.text(" bytes\n");
  out.advance(static_cast<std::size_t>(line.p - start));
  if (record.level >= 5) text_stats(out, v, layout, depth_);
}

namespace {

void write_arg(TextRecord& record, const Arg& a, int depth) {
  TextWriter to(record, a.name, depth);
  switch (a.kind) {
    case Arg::Kind::None: return to.none(a.type.c_str());
    case Arg::Kind::Bool: return to.boolean(a.bool_value);
    case Arg::Kind::Int: return to.integer(a.type.c_str(), a.int_value);
    case Arg::Kind::UInt: return to.unsigned_integer(a.type.c_str(), a.uint_value);
    case Arg::Kind::Float: return to.floating(a.type == "f32", a.float_value);
    case Arg::Kind::String: return to.string(a.text);
    case Arg::Kind::Enum: return to.enumeration(a.int_value, a.text);
    case Arg::Kind::Tensor: return to.tensor(a.tensor->dl());
    case Arg::Kind::List:
      to.list(a.items.size());
      for (const Arg& item : a.items) write_arg(record, item, depth + 1);
      return;
  }
}

}  // namespace

void write_text_arg(TextRecord& record, const Arg& a) {
  if (!record.gave_up) write_arg(record, a, 1);
}

namespace {

// " pid <pid> tid <tid> #" as last written by this thread: the same in every record it writes
// (a forked child's first record finds another pid and writes it again). Trivially destructible:
// still there for a record written from another thread_local's destructor.
struct ProcessAndThread {
  long pid = -1;
  long tid = -1;
  std::size_t size = 0;
  char text[64];  // 5 + 20 + 5 + 20 + 2 characters at most
};
MATE_INITIAL_EXEC thread_local ProcessAndThread t_process_and_thread;

char* put_process_and_thread(char* out, long pid, long tid) {
  ProcessAndThread& cached = t_process_and_thread;
  if (cached.pid != pid || cached.tid != tid) {
    InlineRecordBuffer<sizeof cached.text> text;
    put(text, " pid ");
    append_int(text, pid);
    put(text, " tid ");
    append_int(text, tid);
    put(text, " #");
    std::memcpy(cached.text, text.data(), text.size());
    cached.size = text.size();
    cached.pid = pid;
    cached.tid = tid;
  }
  std::memcpy(out, cached.text, sizeof cached.text);  // a fixed-size copy; the end is the text's
  return out + cached.size;
}

}  // namespace

void text_header(const Header& h, Event event, const CallOutcome* outcome, RecordBuffer& out) {
  // "[<timestamp> pid <pid> tid <tid> #<seq>] <name>", then the event, as one Line.
  const std::string_view name(h.name);
  const bool timed = event == Event::Outputs || event == Event::Exception;
  char* const start = out.room(1 + core::kUtcMicrosMax + sizeof(ProcessAndThread::text) + 24 + 2 + name.size() +
                               (timed ? sizeof " exception (" + kFixed1Max + sizeof " us): " : sizeof " inputs\n"));
  Line line{start};
  line.text("[");
  line.p += core::write_utc_iso8601_micros(h.time, line.p);
  line.p = put_process_and_thread(line.p, h.pid, h.tid);
  line.p = std::to_chars(line.p, line.p + 24, h.seq).ptr;  // (rarely below 100: not Line::number)
  line.text("] ");
  line.text(name);
  switch (event) {
    case Event::Call: line.text("\n"); break;
    case Event::Inputs: line.text(" inputs\n"); break;
    case Event::Outputs:
      line.text(" outputs (");
      line.p = write_fixed1(outcome->elapsed_us, line.p);
      line.text(" us)\n");
      break;
    case Event::Exception:
      line.text(" exception (");
      line.p = write_fixed1(outcome->elapsed_us, line.p);
      line.text(" us): ");
      break;
  }
  out.advance(static_cast<std::size_t>(line.p - start));
  if (event != Event::Exception) return;
  if (outcome->exception_type.empty() && outcome->exception_message.empty()) {
    put(out, "unknown (an exception left the call; its message is recorded only by MATE_API(...).run)\n");
  } else {
    if (!outcome->exception_type.empty()) {
      append_escaped(out, outcome->exception_type, false);
      put(out, ": ");
    }
    append_escaped(out, outcome->exception_message, false);
    put(out, "\n");
  }
}

}  // namespace mate::log::detail
