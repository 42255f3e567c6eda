#include "zip_archive.hpp"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <limits>

namespace mate::dump::detail {

namespace {

constexpr std::uint32_t kLocalSig = 0x04034b50, kCentralSig = 0x02014b50, kEndSig = 0x06054b50,
                        kEnd64Sig = 0x06064b50, kLocator64Sig = 0x07064b50;
constexpr std::size_t kLocalHeader = 30, kCentralHeader = 46, kEndRecord = 22, kEnd64Record = 56, kLocator64 = 20;
constexpr std::uint32_t kMax32 = 0xFFFFFFFFu;
constexpr std::uint16_t kMax16 = 0xFFFFu;
constexpr std::uint16_t kZip64Extra = 0x0001, kPaddingExtra = 0x4246;  // "FB": PyTorch's padding
constexpr std::uint16_t kVersion20 = 20, kVersion45 = 45;                // 4.5: ZIP64
constexpr std::uint16_t kDosDate = (0 << 9) | (1 << 5) | 1;              // 1980-01-01: reproducible files

void put16(std::string& s, std::uint16_t v) {
  s.push_back(static_cast<char>(v & 0xff));
  s.push_back(static_cast<char>(v >> 8));
}
void put32(std::string& s, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put64(std::string& s, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
std::uint16_t get16(const unsigned char* p) { return static_cast<std::uint16_t>(p[0] | (p[1] << 8)); }
std::uint32_t get32(const unsigned char* p) {
  return static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8) | (static_cast<std::uint32_t>(p[2]) << 16) |
         (static_cast<std::uint32_t>(p[3]) << 24);
}
std::uint64_t get64(const unsigned char* p) { return get32(p) | (static_cast<std::uint64_t>(get32(p + 4)) << 32); }

bool needs_zip64(std::uint64_t size, ZipOptions o) { return o.force_zip64 || size >= kMax32; }

// The local header's extra fields: ZIP64 sizes when needed, then padding so that the data
// (at offset + 30 + name + extra) starts at a multiple of 64.
std::string local_extra(std::uint64_t offset, std::size_t name_len, std::uint64_t size, ZipOptions o) {
  std::string extra;
  if (needs_zip64(size, o)) {
    put16(extra, kZip64Extra);
    put16(extra, 16);
    put64(extra, size);
    put64(extra, size);
  }
  const std::uint64_t start = offset + kLocalHeader + name_len + extra.size() + 4;
  const std::uint64_t pad = (kZipDataAlignment - start % kZipDataAlignment) % kZipDataAlignment;
  put16(extra, kPaddingExtra);
  put16(extra, static_cast<std::uint16_t>(pad));
  extra.append(pad, 'Z');
  return extra;
}

std::string local_header(std::string_view name, std::uint64_t offset, std::uint64_t size, std::uint32_t crc, ZipOptions o) {
  const bool z64 = needs_zip64(size, o);
  const std::string extra = local_extra(offset, name.size(), size, o);
  std::string h;
  put32(h, kLocalSig);
  put16(h, z64 ? kVersion45 : kVersion20);
  put16(h, 0);  // flags
  put16(h, 0);  // method: stored
  put16(h, 0);  // time
  put16(h, kDosDate);
  put32(h, crc);
  put32(h, z64 ? kMax32 : static_cast<std::uint32_t>(size));
  put32(h, z64 ? kMax32 : static_cast<std::uint32_t>(size));
  put16(h, static_cast<std::uint16_t>(name.size()));
  put16(h, static_cast<std::uint16_t>(extra.size()));
  h.append(name);
  h.append(extra);
  return h;
}

std::size_t central_extra_size(std::uint64_t offset, std::uint64_t size, ZipOptions o) {
  std::size_t fields = 0;
  if (needs_zip64(size, o)) fields += 2;
  if (o.force_zip64 || offset >= kMax32) fields += 1;
  return fields == 0 ? 0 : 4 + 8 * fields;
}

constexpr std::size_t kCrcOffsetInLocal = 14;

}  // namespace

std::uint32_t crc32_of(std::uint32_t crc, const void* data, std::size_t bytes) noexcept {
  return static_cast<std::uint32_t>(::crc32_z(crc, static_cast<const Bytef*>(data), bytes));
}

bool ZipWriter::put(const void* data, std::size_t bytes) {
  if (failed_) return false;
  if (!out_.append(data, bytes)) {
    failed_ = true;
    return false;
  }
  at_ += bytes;
  return true;
}

bool ZipWriter::add(std::string_view name, std::string_view data) {
  return begin(name, data.size()) && append(data.data(), data.size()) && end();
}

bool ZipWriter::begin(std::string_view name, std::uint64_t size) {
  if (failed_ || open_ || name.empty() || name.size() > kMax16) return failed_ = true, false;
  Entry e{std::string(name), at_, size, 0, needs_zip64(size, options_)};
  const std::string h = local_header(name, at_, size, 0, options_);
  entries_.push_back(std::move(e));
  open_ = true;
  streamed_ = 0;
  return put(h.data(), h.size());
}

bool ZipWriter::append(const void* data, std::size_t bytes) {
  if (!open_ || streamed_ + bytes > entries_.back().size) return failed_ = true, false;
  entries_.back().crc = crc32_of(entries_.back().crc, data, bytes);
  streamed_ += bytes;
  return put(data, bytes);
}

bool ZipWriter::end() {
  if (failed_ || !open_ || streamed_ != entries_.back().size) return failed_ = true, false;
  open_ = false;
  std::string crc;
  put32(crc, entries_.back().crc);
  if (!out_.overwrite(entries_.back().offset + kCrcOffsetInLocal, crc.data(), crc.size())) return failed_ = true, false;
  return true;
}

bool ZipWriter::finish() {
  if (failed_ || open_) return false;
  const std::uint64_t cd_offset = at_;
  std::string cd;
  for (const Entry& e : entries_) {
    const bool z64_size = needs_zip64(e.size, options_);
    const bool z64_offset = options_.force_zip64 || e.offset >= kMax32;
    put32(cd, kCentralSig);
    put16(cd, kVersion45);  // made by: MS-DOS attributes, spec 4.5
    put16(cd, z64_size || z64_offset ? kVersion45 : kVersion20);
    put16(cd, 0);
    put16(cd, 0);
    put16(cd, 0);
    put16(cd, kDosDate);
    put32(cd, e.crc);
    put32(cd, z64_size ? kMax32 : static_cast<std::uint32_t>(e.size));
    put32(cd, z64_size ? kMax32 : static_cast<std::uint32_t>(e.size));
    put16(cd, static_cast<std::uint16_t>(e.name.size()));
    put16(cd, static_cast<std::uint16_t>(central_extra_size(e.offset, e.size, options_)));
    put16(cd, 0);  // comment
    put16(cd, 0);  // disk
    put16(cd, 0);  // internal attributes
    put32(cd, 0);  // external attributes
    put32(cd, z64_offset ? kMax32 : static_cast<std::uint32_t>(e.offset));
    cd.append(e.name);
    if (const std::size_t n = central_extra_size(e.offset, e.size, options_); n > 0) {
      put16(cd, kZip64Extra);
      put16(cd, static_cast<std::uint16_t>(n - 4));
      if (z64_size) {
        put64(cd, e.size);
        put64(cd, e.size);
      }
      if (z64_offset) put64(cd, e.offset);
    }
  }
  const std::uint64_t cd_size = cd.size();
  const std::uint64_t count = entries_.size();
  const bool z64 = options_.force_zip64 || count >= kMax16 || cd_offset >= kMax32 || cd_size >= kMax32 ||
                   std::any_of(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.zip64 || e.offset >= kMax32; });
  std::string end = cd;
  if (z64) {
    const std::uint64_t end64_at = cd_offset + cd_size;
    put32(end, kEnd64Sig);
    put64(end, kEnd64Record - 12);  // size of the rest of the record
    put16(end, kVersion45);
    put16(end, kVersion45);
    put32(end, 0);
    put32(end, 0);
    put64(end, count);
    put64(end, count);
    put64(end, cd_size);
    put64(end, cd_offset);
    put32(end, kLocator64Sig);
    put32(end, 0);
    put64(end, end64_at);
    put32(end, 1);
  }
  const bool escape = options_.force_zip64;
  put32(end, kEndSig);
  put16(end, 0);
  put16(end, 0);
  put16(end, escape || count >= kMax16 ? kMax16 : static_cast<std::uint16_t>(count));
  put16(end, escape || count >= kMax16 ? kMax16 : static_cast<std::uint16_t>(count));
  put32(end, escape || cd_size >= kMax32 ? kMax32 : static_cast<std::uint32_t>(cd_size));
  put32(end, escape || cd_offset >= kMax32 ? kMax32 : static_cast<std::uint32_t>(cd_offset));
  put16(end, 0);  // comment
  return put(end.data(), end.size());
}

std::uint64_t ZipWriter::archive_size(const std::vector<std::pair<std::size_t, std::uint64_t>>& entries, ZipOptions o) {
  std::uint64_t at = 0, cd = 0;
  bool z64 = o.force_zip64 || entries.size() >= kMax16;
  for (const auto& [name_len, size] : entries) {
    const std::uint64_t offset = at;
    at += kLocalHeader + name_len + local_extra(offset, name_len, size, o).size() + size;
    cd += kCentralHeader + name_len + central_extra_size(offset, size, o);
    z64 = z64 || needs_zip64(size, o) || offset >= kMax32;
  }
  z64 = z64 || at >= kMax32 || cd >= kMax32;
  return at + cd + (z64 ? kEnd64Record + kLocator64 : 0) + kEndRecord;
}

// --- reading ---

namespace {

// The ZIP64 extra field's values, in the order the specification gives them, for the fields
// whose 32-bit value is the escape.
void read_zip64_extra(const unsigned char* extra, std::size_t len, bool want_size, bool want_offset, std::uint64_t& size,
                      std::uint64_t& offset, const std::string& name) {
  std::size_t at = 0;
  while (at + 4 <= len) {
    const std::uint16_t id = get16(extra + at), n = get16(extra + at + 2);
    if (at + 4 + n > len) break;
    if (id == kZip64Extra) {
      std::size_t p = at + 4;
      if (want_size) {
        if (p + 16 > at + 4 + n) throw ZipError("entry " + name + ": ZIP64 extra field lacks the sizes");
        size = get64(extra + p);  // uncompressed; the compressed size (equal, stored) follows
        if (get64(extra + p + 8) != size) throw ZipError("entry " + name + " is not stored (sizes differ)");
        p += 16;
      }
      if (want_offset) {
        if (p + 8 > at + 4 + n) throw ZipError("entry " + name + ": ZIP64 extra field lacks the header offset");
        offset = get64(extra + p);
      }
      return;
    }
    at += 4 + n;
  }
  throw ZipError("entry " + name + ": sizes escaped to ZIP64 but no ZIP64 extra field");
}

}  // namespace

ZipReader::ZipReader(ZipSource source) : source_(std::move(source)) {
  const std::uint64_t size = source_.size;
  if (size < kEndRecord) throw ZipError("truncated or not a zip archive: " + std::to_string(size) + " bytes, shorter than a zip's end record");
  // The end record is the last 22 bytes plus a comment of up to 65535 bytes.
  const std::size_t tail_len = static_cast<std::size_t>(std::min<std::uint64_t>(size, kEndRecord + 65535));
  std::vector<unsigned char> tail(tail_len);
  source_.read(size - tail_len, tail.data(), tail_len);
  std::size_t end_at = std::string::npos;
  for (std::size_t i = tail_len - kEndRecord + 1; i-- > 0;) {
    if (get32(&tail[i]) == kEndSig && i + kEndRecord + get16(&tail[i + 20]) == tail_len) {
      end_at = i;
      break;
    }
  }
  if (end_at == std::string::npos) throw ZipError("truncated or not a zip archive (no end of central directory record)");
  const unsigned char* e = &tail[end_at];
  const std::uint64_t end_pos = size - tail_len + end_at;
  if (get16(e + 4) != 0 || get16(e + 6) != 0) throw ZipError("multi-disk zip archives are not supported");
  std::uint64_t count = get16(e + 10), cd_size = get32(e + 12), cd_offset = get32(e + 16);
  std::uint64_t cd_limit = end_pos;  // the central directory ends before the end records
  if (end_pos >= kLocator64) {
    unsigned char loc[kLocator64];
    source_.read(end_pos - kLocator64, loc, kLocator64);
    if (get32(loc) == kLocator64Sig) {
      const std::uint64_t rec = get64(loc + 8);
      if (rec > end_pos - kLocator64 || end_pos - kLocator64 - rec < kEnd64Record) throw ZipError("ZIP64 end record outside the archive");
      unsigned char r[kEnd64Record];
      source_.read(rec, r, kEnd64Record);
      if (get32(r) != kEnd64Sig) throw ZipError("ZIP64 end record has a wrong signature");
      if (get32(r + 16) != 0 || get32(r + 20) != 0) throw ZipError("multi-disk zip archives are not supported");
      count = get64(r + 32);
      cd_size = get64(r + 40);
      cd_offset = get64(r + 48);
      cd_limit = rec;
    }
  }
  if (count > kMaxEntries) throw ZipError(std::to_string(count) + " entries, more than the " + std::to_string(kMaxEntries) + " accepted");
  if (cd_offset > cd_limit || cd_size > cd_limit - cd_offset) throw ZipError("central directory outside the archive");
  if (cd_size > count * (kCentralHeader + 3 * 65535)) throw ZipError("central directory larger than its entries");
  directory_offset_ = cd_offset;
  std::vector<unsigned char> cd(static_cast<std::size_t>(cd_size));
  source_.read(cd_offset, cd.data(), cd.size());
  std::size_t at = 0;
  for (std::uint64_t k = 0; k < count; ++k) {
    if (cd.size() - at < kCentralHeader || get32(&cd[at]) != kCentralSig) throw ZipError("central directory entry " + std::to_string(k) + " is damaged");
    const unsigned char* h = &cd[at];
    const std::size_t name_len = get16(h + 28), extra_len = get16(h + 30), comment_len = get16(h + 32);
    if (cd.size() - at - kCentralHeader < name_len + extra_len + comment_len) throw ZipError("central directory entry " + std::to_string(k) + " is truncated");
    ZipEntry entry;
    entry.name.assign(reinterpret_cast<const char*>(h + kCentralHeader), name_len);
    const std::uint16_t flags = get16(h + 8), method = get16(h + 10);
    if ((flags & 1) != 0) throw ZipError("entry " + entry.name + " is encrypted");
    if (method != 0) throw ZipError("entry " + entry.name + " is compressed (method " + std::to_string(method) + "); only stored entries are read");
    if (get16(h + 34) != 0) throw ZipError("multi-disk zip archives are not supported");
    entry.crc = get32(h + 16);
    const std::uint32_t comp = get32(h + 20), uncomp = get32(h + 24), offset = get32(h + 42);
    entry.size = uncomp;
    entry.header_offset = offset;
    if ((comp == kMax32) != (uncomp == kMax32) || (comp != kMax32 && comp != uncomp))
      throw ZipError("entry " + entry.name + " is not stored (sizes differ)");
    if (uncomp == kMax32 || offset == kMax32)
      read_zip64_extra(h + kCentralHeader + name_len, extra_len, uncomp == kMax32, offset == kMax32, entry.size, entry.header_offset, entry.name);
    if (find(entry.name) != nullptr) throw ZipError("entry " + entry.name + " appears twice");
    entries_.push_back(std::move(entry));
    at += kCentralHeader + name_len + extra_len + comment_len;
  }
}

const ZipEntry* ZipReader::find(std::string_view name) const noexcept {
  for (const ZipEntry& e : entries_)
    if (e.name == name) return &e;
  return nullptr;
}

std::uint64_t ZipReader::data_offset(const ZipEntry& e) const {
  if (e.header_offset > directory_offset_ || directory_offset_ - e.header_offset < kLocalHeader)
    throw ZipError("entry " + e.name + ": local header outside the archive");
  unsigned char h[kLocalHeader];
  source_.read(e.header_offset, h, kLocalHeader);
  if (get32(h) != kLocalSig) throw ZipError("entry " + e.name + ": local header has a wrong signature");
  if (get16(h + 8) != 0) throw ZipError("entry " + e.name + " is compressed; only stored entries are read");
  const std::size_t name_len = get16(h + 26), extra_len = get16(h + 28);
  const std::uint64_t data = e.header_offset + kLocalHeader + name_len + extra_len;
  if (data > directory_offset_ || directory_offset_ - data < e.size)
    throw ZipError("entry " + e.name + ": data outside the archive (truncated?)");
  std::string name(name_len, '\0');
  source_.read(e.header_offset + kLocalHeader, name.data(), name_len);
  if (name != e.name) throw ZipError("entry " + e.name + ": local header names " + name);
  return data;
}

void ZipReader::read(const ZipEntry& e, std::uint64_t offset, void* into, std::size_t bytes) const {
  if (offset > e.size || bytes > e.size - offset) throw ZipError("entry " + e.name + ": read past its end");
  source_.read(data_offset(e) + offset, into, bytes);
  if (offset == 0 && bytes == e.size && crc32_of(0, into, bytes) != e.crc)
    throw ZipError("entry " + e.name + ": CRC-32 mismatch (the data is corrupt)");
}

std::string ZipReader::read_all(const ZipEntry& e, std::uint64_t max_bytes) const {
  if (e.size > max_bytes) throw ZipError("entry " + e.name + " has " + std::to_string(e.size) + " bytes, more than the " + std::to_string(max_bytes) + " accepted");
  std::string out(static_cast<std::size_t>(e.size), '\0');
  read(e, 0, out.data(), out.size());
  return out;
}

}  // namespace mate::dump::detail
