// The torch.save format of dumps, piece by piece: the zip archive (writer and reader), the
// tensor pickle, and whole `.pt` files (written, read back, checked by Python's zipfile and
// torch.load where Debian's /usr/bin/python3 has torch).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "dl_tensor.hpp"
#include "dump/torch_pickle.hpp"
#include "dump/torch_save.hpp"
#include "dump/zip_archive.hpp"
#include "mate/dump/tensor_file.hpp"
#include "mate/tensor/dtype.hpp"
#include "subprocess.hpp"
#include "temp_dir.hpp"

namespace {

namespace fs = std::filesystem;
using mate::dump::DumpError;
using mate::dump::detail::PickledTensor;
using mate::dump::detail::ZipOptions;
using mate::dump::detail::ZipReader;
using mate::dump::detail::ZipWriter;

struct MemoryOutput final : mate::dump::detail::ZipOutput {
  bool append(const void* data, std::size_t bytes) override {
    out.append(static_cast<const char*>(data), bytes);
    return true;
  }
  bool overwrite(std::uint64_t offset, const void* data, std::size_t bytes) override {
    if (offset + bytes > out.size()) return false;
    std::memcpy(out.data() + offset, data, bytes);
    return true;
  }
  std::string out;
};

mate::dump::detail::ZipSource source_of(const std::string& bytes) {
  return {bytes.size(), [&bytes](std::uint64_t offset, void* into, std::size_t n) {
            if (offset + n > bytes.size()) throw std::runtime_error("read past the end");
            std::memcpy(into, bytes.data() + offset, n);
          }};
}

std::string archive(ZipOptions options) {
  MemoryOutput m;
  ZipWriter zip(m, options);
  EXPECT_TRUE(zip.add("archive/data.pkl", "pickled"));
  EXPECT_TRUE(zip.begin("archive/data/0", 10));
  EXPECT_TRUE(zip.append("01234", 5));
  EXPECT_TRUE(zip.append("56789", 5));
  EXPECT_TRUE(zip.end());
  EXPECT_TRUE(zip.add("archive/version", "3\n"));
  EXPECT_TRUE(zip.finish());
  EXPECT_EQ(zip.size(), m.out.size());
  EXPECT_EQ(ZipWriter::archive_size({{16, 7}, {14, 10}, {15, 2}}, options), m.out.size());
  return m.out;
}

TEST(ZipArchive, EntriesReadBackAlignedWithTheirCrc) {
  for (bool zip64 : {false, true}) {
    SCOPED_TRACE(zip64 ? "zip64" : "plain");
    const std::string bytes = archive({zip64});
    const ZipReader zip(source_of(bytes));
    ASSERT_EQ(zip.entries().size(), 3u);
    const auto* data = zip.find("archive/data/0");
    ASSERT_NE(data, nullptr);
    EXPECT_EQ(zip.read_all(*data, 100), "0123456789");
    EXPECT_EQ(data->crc, mate::dump::detail::crc32_of(0, "0123456789", 10));
    EXPECT_EQ(zip.read_all(*zip.find("archive/data.pkl"), 100), "pickled");
    for (const auto& e : zip.entries()) EXPECT_EQ(zip.data_offset(e) % 64, 0u) << e.name;
    // ZIP64: the 32-bit fields are escapes, the records after the central directory are there.
    EXPECT_EQ(bytes.find(std::string("PK\x06\x06", 4)) != std::string::npos, zip64);
    char partial[4];
    zip.read(*data, 3, partial, 4);
    EXPECT_EQ(std::string(partial, 4), "3456");
  }
}

TEST(ZipArchive, StreamedEntriesMustMatchTheirSize) {
  MemoryOutput m;
  ZipWriter zip(m);
  ASSERT_TRUE(zip.begin("a/b", 4));
  EXPECT_FALSE(zip.append("12345", 5));
  EXPECT_FALSE(zip.end());
  EXPECT_FALSE(zip.finish());
}

TEST(ZipArchive, DamageIsAnErrorSayingWhat) {
  const std::string good = archive({});
  auto error_of = [](const std::string& bytes) -> std::string {
    try {
      const ZipReader zip(source_of(bytes));
      for (const auto& e : zip.entries()) (void)zip.read_all(e, 1 << 20);
    } catch (const mate::dump::detail::ZipError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(error_of("short"), "truncated or not a zip archive: 5 bytes, shorter than a zip's end record");
  EXPECT_EQ(error_of(good.substr(0, good.size() - 1)), "truncated or not a zip archive (no end of central directory record)");
  std::string flipped = good;
  flipped[good.find("0123456789") + 4] ^= 1;
  EXPECT_EQ(error_of(flipped), "entry archive/data/0: CRC-32 mismatch (the data is corrupt)");
  std::string compressed = good;
  const std::size_t central = compressed.find(std::string("PK\x01\x02", 4));
  compressed[central + 10] = 8;  // deflate
  EXPECT_EQ(error_of(compressed), "entry archive/data.pkl is compressed (method 8); only stored entries are read");
  std::string far = good;
  far[central + 45] = '\x7f';  // the local header offset points past the central directory
  EXPECT_EQ(error_of(far), "entry archive/data.pkl: local header outside the archive");
}

PickledTensor sample_pickle() {
  PickledTensor t;
  t.storage_type = "BFloat16Storage";
  t.storage_numel = (std::uint64_t{1} << 40) + 3;  // above 32 bits: LONG1
  t.storage_offset = 70000;
  t.size = {3, 0, 300};
  t.stride = {1, 65536, 2};
  return t;
}

TEST(TorchPickle, RoundTrips) {
  const PickledTensor t = sample_pickle();
  const PickledTensor back = mate::dump::detail::unpickle_tensor(mate::dump::detail::pickle_tensor(t));
  EXPECT_EQ(back.storage_type, t.storage_type);
  EXPECT_EQ(back.key, "0");
  EXPECT_EQ(back.location, "cpu");
  EXPECT_EQ(back.storage_numel, t.storage_numel);
  EXPECT_EQ(back.storage_offset, t.storage_offset);
  EXPECT_EQ(back.size, t.size);
  EXPECT_EQ(back.stride, t.stride);
}

TEST(TorchPickle, UsesOnlyAllowlistedGlobals) {
  const std::string p = mate::dump::detail::pickle_tensor(sample_pickle());
  // GLOBAL is 'c' module '\n' name '\n'.
  std::vector<std::string> globals;
  const std::regex global("c([a-z_.]+)\n([A-Za-z_0-9]+)\n");
  for (auto it = std::sregex_iterator(p.begin(), p.end(), global); it != std::sregex_iterator(); ++it)
    globals.push_back((*it)[1].str() + "." + (*it)[2].str());
  EXPECT_EQ(globals, (std::vector<std::string>{"torch._utils._rebuild_tensor_v2", "torch.BFloat16Storage", "collections.OrderedDict"}));
  EXPECT_NE(p.find("BFloat16Storage"), std::string::npos);
  EXPECT_EQ(p.find("_load_from_bytes"), std::string::npos);
}

TEST(TorchPickle, RejectsWhatIsNotOneTensor) {
  auto error_of = [](const std::string& pickle) -> std::string {
    try {
      (void)mate::dump::detail::unpickle_tensor(pickle);
    } catch (const mate::dump::detail::PickleError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(error_of("\x80\x02}."), "data.pkl: the pickle holds a dict, not a tensor (at byte 4)");
  const char reduce_system[] = "\x80\x02" "cos\nsystem\nX\x02\x00\x00\x00" "lsR.";
  EXPECT_EQ(error_of(std::string(reduce_system, sizeof reduce_system - 1)),
            "data.pkl: REDUCE of os.system with a string (at byte 21)");
  EXPECT_EQ(error_of("\x80\x02" "cos\nsystem\n)R."),
            "data.pkl: calls os.system (only torch._utils._rebuild_tensor_v2 is read: one tensor per file) (at byte 15)");
  const std::string good = mate::dump::detail::pickle_tensor(sample_pickle());
  EXPECT_EQ(error_of(good.substr(0, 40)), "data.pkl: truncated pickle (at byte 38)");
  EXPECT_EQ(error_of(good.substr(0, good.size() - 1)), "data.pkl: truncated pickle (no STOP) (at byte " + std::to_string(good.size() - 1) + ")");
  EXPECT_EQ(error_of("\x80\x02(((((((t."), "data.pkl: the pickle ends with 1 values on its stack (at byte 11)");
  EXPECT_EQ(error_of("\x80\x09."), "data.pkl: unsupported pickle protocol 9 (at byte 2)");
  // Nesting is bounded (a deep nest would recurse as deep when destroyed).
  EXPECT_EQ(error_of("\x80\x02K\x00" + std::string(20, '\x85') + "."), "data.pkl: tuples nested deeper than 16 (at byte 21)");
  EXPECT_EQ(error_of("\x80\x02" + std::string(20, '(')), "data.pkl: MARKs nested deeper than 16 (at byte 19)");
  EXPECT_EQ(error_of("\x80\x02\xff"), "data.pkl: unsupported pickle opcode 0xff (at byte 3)");
}

// --- whole files ---

class TorchSaveFile : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const { return (fs::path(tmp_.path) / name).string(); }
  mate::testing::TempDir tmp_{"mate_torch_save"};
};

// A 3x4 f32 buffer (values 0..11) seen through `shape`/`strides`/`offset` (in elements).
struct View {
  std::vector<float> buf = std::vector<float>(12);
  std::vector<std::int64_t> shape, strides;
  DLTensor dl{};
  View(std::vector<std::int64_t> s, std::vector<std::int64_t> st, std::uint64_t offset, DLDataType type = {kDLFloat, 32, 1})
      : shape(std::move(s)), strides(std::move(st)) {
    for (int i = 0; i < 12; ++i) buf[static_cast<std::size_t>(i)] = static_cast<float>(i);
    dl.data = buf.data();
    dl.device = {kDLCPU, 0};
    dl.ndim = static_cast<int>(shape.size());
    dl.dtype = type;
    dl.shape = shape.data();
    dl.strides = strides.data();
    dl.byte_offset = offset * sizeof(float);
  }
  mate::tensor::TensorView view() const { return mate::tensor::TensorView(dl); }
};

TEST_F(TorchSaveFile, ReadsBackWithItsLayout) {
  const View t({2, 3}, {1, 4}, 1);  // transposed and offset: elements 1 to 10 of the buffer
  const std::string p = path("t.pt");
  const auto w = mate::dump::write_torch_save(p, t.view());
  ASSERT_TRUE(w.ok()) << w.error;
  EXPECT_EQ(w.bytes, fs::file_size(p));
  EXPECT_EQ(w.bytes, mate::dump::torch_save_file_size(t.view()));
  const mate::dump::TensorRecord r = mate::dump::read_torch_save(p);
  EXPECT_EQ(r.shape, (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(r.strides, (std::vector<std::int64_t>{1, 4}));
  EXPECT_EQ(r.data.size(), 10 * sizeof(float));  // the extent only
  float first;
  std::memcpy(&first, r.data.data(), 4);
  EXPECT_EQ(first, 1.0f);
  const auto full = mate::dump::with_recorded_layout(r, t.view(), p);
  EXPECT_EQ(full.byte_offset, 1 * sizeof(float));
}

TEST_F(TorchSaveFile, LayoutsTorchCannotExpressAreRawBytesRestoredFromTheRecord) {
  const View neg({3}, {-2}, 10);      // base[10], base[8], base[6]
  const View u32({4}, {1}, 0, {kDLUInt, 32, 1});
  for (const View* v : {&neg, &u32}) {
    EXPECT_FALSE(mate::dump::torch_expresses(v->view()));
    const std::string p = path(v == &neg ? "neg.pt" : "u32.pt");
    ASSERT_TRUE(mate::dump::write_torch_save(p, v->view()).ok());
    const auto stored = mate::dump::read_torch_save(p);
    EXPECT_EQ(stored.dtype.code, kDLUInt);
    EXPECT_EQ(stored.dtype.bits, 8);
    EXPECT_EQ(stored.shape, (std::vector<std::int64_t>{static_cast<std::int64_t>(v->view().extent().size())}));
    const auto r = mate::dump::with_recorded_layout(stored, v->view(), p);
    EXPECT_EQ(r.strides, v->strides);
    EXPECT_EQ(r.data_begin, v->view().extent().begin);
    EXPECT_EQ(r.dtype.bits, v->dl.dtype.bits);
  }
  // A record that does not match the file is an error naming both.
  const View other({2}, {1}, 0);
  ASSERT_TRUE(mate::dump::write_torch_save(path("other.pt"), other.view()).ok());
  try {
    (void)mate::dump::with_recorded_layout(mate::dump::read_torch_save(path("other.pt")), u32.view(), "other.pt");
    FAIL() << "no error";
  } catch (const DumpError& e) {
    EXPECT_STREQ(e.what(), "other.pt: holds a f32 [2] tensor; call.json records u32 [4] with strides [1], stored as its 16 bytes (a 1-D uint8 tensor)");
  }
}

TEST_F(TorchSaveFile, ForcedZip64ReadsBack) {
  const View t({3, 4}, {4, 1}, 0);
  const std::string p = path("z64.pt");
  const auto w = mate::dump::detail::write_torch_save(p, t.view(), {}, ZipOptions{true});
  ASSERT_TRUE(w.ok()) << w.error;
  EXPECT_EQ(w.bytes, mate::dump::detail::torch_save_file_size(t.view(), ZipOptions{true}));
  const auto r = mate::dump::read_torch_save(p);
  EXPECT_EQ(r.shape, (std::vector<std::int64_t>{3, 4}));
  EXPECT_EQ(r.data.size(), 48u);
}

TEST_F(TorchSaveFile, ANonRegularOrLinkedFileIsRefused) {
  const View t({2}, {1}, 0);
  ASSERT_TRUE(mate::dump::write_torch_save(path("t.pt"), t.view()).ok());
  fs::create_symlink(path("t.pt"), path("link.pt"));
  EXPECT_THROW((void)mate::dump::read_torch_save(path("link.pt")), DumpError);
  EXPECT_THROW((void)mate::dump::read_torch_save(tmp_.path), DumpError);
}

// What Python makes of the files: zipfile validates them (CRCs, ZIP64), torch.load opens them
// with weights_only=True; and files torch.save wrote are read here.
bool have_torch() {
  return fs::exists("/usr/bin/python3") && mate::testing::run({"/usr/bin/python3", "-c", "import torch"}, {}).exit_code == 0;
}

TEST_F(TorchSaveFile, PythonZipfileAndTorchLoadAgree) {
  if (!have_torch()) GTEST_SKIP() << "/usr/bin/python3 with torch not found (scripts/setup.sh installs python3-torch)";
  const View sliced({2, 2}, {4, 1}, 5);  // base[1:3, 1:3]
  ASSERT_TRUE(mate::dump::write_torch_save(path("sliced.pt"), sliced.view()).ok());
  ASSERT_TRUE(mate::dump::detail::write_torch_save(path("z64.pt"), sliced.view(), {}, ZipOptions{true}).ok());
  // An empty tensor too.
  const View empty({0, 3}, {3, 1}, 0);
  ASSERT_TRUE(mate::dump::write_torch_save(path("empty.pt"), empty.view()).ok());
  const std::string script = R"(
import sys, zipfile, torch
d = sys.argv[1]
for name in ("sliced.pt", "z64.pt"):
    with zipfile.ZipFile(d + "/" + name) as z:
        assert z.testzip() is None, name
        assert z.getinfo("archive/data/0").file_size == 24, name
    t = torch.load(d + "/" + name, weights_only=True)
    assert t.tolist() == [[5.0, 6.0], [9.0, 10.0]], t
    assert t.stride() == (4, 1) and not t.is_contiguous(), t.stride()
e = torch.load(d + "/empty.pt", weights_only=True)
assert e.shape == (0, 3) and e.dtype == torch.float32
# torch.save's own files, for the reader: a slice with a storage offset, and bf16.
base = torch.arange(12, dtype=torch.float32).reshape(3, 4)
torch.save(base[1:, 1:3].t(), d + "/torch_slice.pt")
torch.save(torch.tensor([1.5, -2.0], dtype=torch.bfloat16), d + "/torch_bf16.pt")
print("ok")
)";
  auto r = mate::testing::run({"/usr/bin/python3", "-c", script, tmp_.path}, {});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, "ok\n");
  const auto slice = mate::dump::read_torch_save(path("torch_slice.pt"));
  EXPECT_EQ(slice.shape, (std::vector<std::int64_t>{2, 2}));
  EXPECT_EQ(slice.strides, (std::vector<std::int64_t>{1, 4}));
  ASSERT_EQ(slice.data.size(), 6 * sizeof(float));  // elements 5 .. 10 of the storage
  std::vector<float> v(6);
  std::memcpy(v.data(), slice.data.data(), slice.data.size());
  EXPECT_EQ(v[0], 5.0f);
  EXPECT_EQ(v[5], 10.0f);
  const auto bf = mate::dump::read_torch_save(path("torch_bf16.pt"));
  EXPECT_EQ(bf.dtype.code, kDLBfloat);
  ASSERT_EQ(bf.data.size(), 4u);
  EXPECT_EQ(static_cast<unsigned char>(bf.data[1]), 0x3f);  // 1.5 = 0x3fc0
  EXPECT_EQ(static_cast<unsigned char>(bf.data[0]), 0xc0);
}

}  // namespace
