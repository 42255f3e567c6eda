// The tensor file formats byte by byte, and readers facing damaged files.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "stopped_child.hpp"
#include "host_memory_device.hpp"
#include "mate/dump/call_record.hpp"
#include "mate/dump/tensor_file.hpp"
#include "dl_tensor.hpp"
#include "temp_dir.hpp"

namespace {

using mate::testing::dl_view;
using mate::testing::read_file;

namespace fs = std::filesystem;
using json = nlohmann::json;
using mate::dump::DumpError;
using mate::tensor::ScalarType;

std::uint64_t u64le(const std::string& s, std::size_t at) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s[at + static_cast<std::size_t>(i)]);
  return v;
}

std::string expect_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const DumpError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no DumpError";
  return "";
}

class TensorFileTest : public ::testing::Test {
 protected:
  mate::testing::TempDir dir_{"mate_tensor_file"};
};

// A view with a negative stride and a byte offset: the file keeps exactly the touched bytes and
// the layout, and a view over them reads the same elements.
TEST_F(TensorFileTest, MtensorKeepsStridesOffsetAndDevice) {
  std::vector<float> buf(20);
  for (int i = 0; i < 20; ++i) buf[static_cast<std::size_t>(i)] = static_cast<float>(i);
  std::vector<std::int64_t> shape{3, 2}, strides{-4, 2};
  // Element (0,0) is buf[10]: byte offset 40; rows go backwards by 4, columns forward by 2.
  DLTensor t = dl_view(buf.data(), ScalarType::F32, shape, &strides, 40);
  const std::string path = (dir_ / "t.mtensor").string();
  ASSERT_TRUE(mate::dump::write_mtensor(path, mate::tensor::TensorView(t)).ok());
  const std::string bytes = read_file(path);
  EXPECT_EQ(bytes.substr(0, 8), "MATETNSR");
  const std::uint64_t n = u64le(bytes, 8);
  EXPECT_EQ((16 + n) % 64, 0u) << "data is 64-byte aligned";
  json h = json::parse(bytes.substr(16, n));
  EXPECT_EQ(h["dtype"], "f32");
  EXPECT_EQ(h["shape"], json({3, 2}));
  EXPECT_EQ(h["strides"], json({-4, 2}));
  EXPECT_EQ(h["byte_offset"], 40);
  EXPECT_EQ(h["device"], "cpu");
  EXPECT_EQ(h["data_begin"], -32);  // two rows back: (3-1) * -4 * 4 bytes
  EXPECT_EQ(h["nbytes"], 32 + 4 + 4 + 4);  // up to element (0,1) at +8 bytes, plus one element
  EXPECT_EQ(bytes.size(), 16 + n + 44);

  mate::dump::TensorRecord r = mate::dump::read_mtensor(path);
  EXPECT_EQ(r.byte_offset, 40u);
  EXPECT_EQ(r.strides, strides);
  std::vector<std::uint8_t> storage = r.data;
  DLTensor back = r.view_over(reinterpret_cast<std::uintptr_t>(storage.data()));
  EXPECT_EQ(back.byte_offset, 40u);
  const char* origin = static_cast<const char*>(back.data) + back.byte_offset;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 2; ++j) {
      float v;
      std::memcpy(&v, origin + (i * -4 + j * 2) * 4, 4);
      EXPECT_EQ(v, buf[static_cast<std::size_t>(10 + i * -4 + j * 2)]) << i << "," << j;
    }
}

// Packed fp4 (DLPack 1.1 float4_e2m1fn), a backwards view of 5 elements: its file holds the 3
// bytes those 20 bits lie in, in both formats that keep the layout, and reads back as written.
TEST_F(TensorFileTest, PackedSubByteTensorsStoreTheirBytes) {
  const std::uint8_t bytes[3] = {0x21, 0x43, 0x65};
  std::vector<std::int64_t> shape{5}, strides{-1};
  DLTensor t = dl_view(bytes, ScalarType::U8, shape, &strides, 2);  // element 0: the low nibble of bytes[2]
  t.dtype = DLDataType{17, 4, 1};
  const std::string mt = (dir_ / "t.mtensor").string(), pt = (dir_ / "t.pt").string();
  ASSERT_TRUE(mate::dump::write_mtensor(mt, mate::tensor::TensorView(t)).ok());
  ASSERT_TRUE(mate::dump::write_torch_save(pt, mate::tensor::TensorView(t)).ok());
  const mate::dump::TensorRecord r = mate::dump::read_mtensor(mt);
  EXPECT_EQ(r.data_begin, -2);
  EXPECT_EQ(r.data, (std::vector<std::uint8_t>{0x21, 0x43, 0x65}));
  EXPECT_EQ(r.dtype.code, 17);
  EXPECT_EQ(r.dtype.bits, 4);
  // A header claiming a byte per element is damage, not a longer read.
  std::string file = read_file(mt);
  const std::size_t at = file.find("\"nbytes\":3");
  ASSERT_NE(at, std::string::npos);
  file.replace(at, 10, "\"nbytes\":5");
  const std::string error = expect_error([&] { mate::dump::parse_mtensor(file, "t.mtensor"); });
  EXPECT_NE(error.find("does not match the layout (-2, 3)"), std::string::npos) << error;
  // torch.save stores a type torch lacks as the raw bytes of its extent (a 1-D uint8 tensor).
  const mate::dump::TensorRecord raw = mate::dump::read_torch_save(pt);
  EXPECT_EQ(raw.data, (std::vector<std::uint8_t>{0x21, 0x43, 0x65}));
}

TEST_F(TensorFileTest, EmptyAndZeroRankTensors) {
  float one = 5;
  std::vector<std::int64_t> scalar_shape, empty_shape{0, 3};
  DLTensor s = dl_view(&one, ScalarType::F32, scalar_shape);
  DLTensor e = dl_view(nullptr, ScalarType::F32, empty_shape);
  ASSERT_TRUE(mate::dump::write_mtensor((dir_ / "s").string(), mate::tensor::TensorView(s)).ok());
  ASSERT_TRUE(mate::dump::write_mtensor((dir_ / "e").string(), mate::tensor::TensorView(e)).ok());
  EXPECT_EQ(mate::dump::read_mtensor((dir_ / "s").string()).data.size(), 4u);
  EXPECT_EQ(mate::dump::read_mtensor((dir_ / "e").string()).data.size(), 0u);
}

// The safetensors file against the format's specification, byte by byte.
TEST_F(TensorFileTest, SafetensorsHeaderFollowsTheSpecification) {
  std::vector<float> f(6);
  for (int i = 0; i < 6; ++i) f[static_cast<std::size_t>(i)] = static_cast<float>(i);
  std::vector<std::uint16_t> h{0x3f80, 0x4000, 0xc040};  // bf16 1, 2, -3
  std::vector<std::uint8_t> q{0x38, 0x40};
  std::vector<std::int64_t> fshape{3, 2}, fstrides{1, 3}, hshape{3}, qshape{2};
  DLTensor a = dl_view(f.data(), ScalarType::F32, fshape, &fstrides);  // transposed: non-contiguous
  DLTensor b = dl_view(h.data(), ScalarType::BF16, hshape);
  DLTensor c = dl_view(q.data(), ScalarType::F8E4M3, qshape);
  const std::string path = (dir_ / "t.safetensors").string();
  ASSERT_TRUE(mate::dump::write_safetensors(path, {{"a", mate::tensor::TensorView(a)},
                                                   {"b", mate::tensor::TensorView(b)},
                                                   {"c", mate::tensor::TensorView(c)}}).ok());
  const std::string bytes = read_file(path);
  const std::uint64_t n = u64le(bytes, 0);  // 8-byte little-endian header size
  ASSERT_LE(8 + n, bytes.size());
  EXPECT_EQ(bytes[8], '{');
  EXPECT_EQ((8 + n) % 8, 0u);
  const std::string header = bytes.substr(8, n);
  EXPECT_EQ(header.find_last_not_of(' ') + 1, header.find_last_of('}') + 1) << "only trailing spaces pad";
  json j = json::parse(header);
  EXPECT_EQ(j["a"]["dtype"], "F32");
  EXPECT_EQ(j["a"]["shape"], json({3, 2}));
  EXPECT_EQ(j["a"]["data_offsets"], json({0, 24}));
  EXPECT_EQ(j["b"]["dtype"], "BF16");
  EXPECT_EQ(j["b"]["data_offsets"], json({24, 30}));
  EXPECT_EQ(j["c"]["dtype"], "F8_E4M3");
  EXPECT_EQ(j["c"]["data_offsets"], json({30, 32}));
  for (auto& [k, v] : j["__metadata__"].items()) EXPECT_TRUE(v.is_string()) << k;
  EXPECT_EQ(j["__metadata__"]["mate.a.strides"], "[1,3]");
  const std::string buffer = bytes.substr(8 + n);
  ASSERT_EQ(buffer.size(), 32u) << "the buffer is exactly the tensors";
  const float want[6] = {0, 3, 1, 4, 2, 5};  // row-major copy of the transposed view
  EXPECT_EQ(0, std::memcmp(buffer.data(), want, 24));
  EXPECT_EQ(0, std::memcmp(buffer.data() + 24, h.data(), 6));
  EXPECT_EQ(0, std::memcmp(buffer.data() + 30, q.data(), 2));

  mate::dump::TensorRecord r = mate::dump::read_safetensors(path, "b");
  EXPECT_EQ(r.shape, hshape);
  EXPECT_EQ(r.data.size(), 6u);
}

TEST_F(TensorFileTest, DamagedMtensorFilesGiveClearErrors) {
  std::vector<float> buf(8, 1.0f);
  std::vector<std::int64_t> shape{8};
  DLTensor t = dl_view(buf.data(), ScalarType::F32, shape);
  const std::string path = (dir_ / "t.mtensor").string();
  ASSERT_TRUE(mate::dump::write_mtensor(path, mate::tensor::TensorView(t)).ok());
  const std::string good = read_file(path);
  EXPECT_NE(expect_error([&] { mate::dump::parse_mtensor(good.substr(0, 10)); }).find("truncated"), std::string::npos);
  EXPECT_NE(expect_error([&] { mate::dump::parse_mtensor(good.substr(0, 40)); }).find("truncated"), std::string::npos);
  EXPECT_NE(expect_error([&] { mate::dump::parse_mtensor(good.substr(0, good.size() - 1)); }).find("truncated: 31 of 32"),
            std::string::npos);
  std::string bad_magic = good;
  bad_magic[0] = 'X';
  EXPECT_NE(expect_error([&] { mate::dump::parse_mtensor(bad_magic); }).find("magic"), std::string::npos);
  std::string huge = good;
  huge[15] = '\x7f';
  EXPECT_NE(expect_error([&] { mate::dump::parse_mtensor(huge); }).find("exceeds"), std::string::npos);
  std::string lie = good;
  const auto at = lie.find("\"shape\":[8]");
  ASSERT_NE(at, std::string::npos);
  lie.replace(at, 11, "\"shape\":[9]");
  EXPECT_NE(expect_error([&] { mate::dump::parse_mtensor(lie); }).find("does not match the layout"), std::string::npos);
  EXPECT_NE(expect_error([&] { mate::dump::read_mtensor((dir_ / "missing").string()); }).find("cannot open"), std::string::npos);
}

// Integer fields must be JSON integers in range: the fuzz target found a float (1.5e20) that a
// plain get<int>() would have cast with undefined behaviour.
TEST_F(TensorFileTest, NonIntegerOrOutOfRangeFieldsAreClearErrors) {
  auto mtensor = [](const std::string& device_id, const std::string& shape) {
    const std::string header = R"({"format":"mate-tensor","version":1,"dlpack_dtype":{"code":2,"bits":32,"lanes":1},"shape":)" +
                               shape + R"(,"strides":[1],"byte_offset":0,"device_type":1,"device_id":)" + device_id +
                               R"(,"data_begin":0,"nbytes":4})";
    std::string bytes = "MATETNSR";
    for (int i = 0; i < 8; ++i) bytes += static_cast<char>((header.size() >> (8 * i)) & 0xff);
    return bytes + header + std::string(4, '\0');
  };
  EXPECT_NO_THROW(mate::dump::parse_mtensor(mtensor("0", "[1]")));
  EXPECT_NE(expect_error([&] { mate::dump::parse_mtensor(mtensor("1.5e20", "[1]")); })
                .find("invalid header: device_id: expected an integer, found 1.5e+20"),
            std::string::npos);
  EXPECT_NE(expect_error([&] { mate::dump::parse_mtensor(mtensor("4294967296", "[1]")); }).find("device_id: 4294967296 is out of range"),
            std::string::npos);
  EXPECT_NE(expect_error([&] { mate::dump::parse_mtensor(mtensor("0", "[1e300]")); }).find("shape: expected an integer"),
            std::string::npos);

  const fs::path call = dir_ / "20260101_000000_000_pid1_call00000001_g";
  fs::create_directories(call);
  std::ofstream(call / "call.json") << R"({"format":"mate-dump","version":1,"function":"g","seq":1e30,"status":"completed","tensor_format":"mate"})";
  EXPECT_NE(expect_error([&] { mate::dump::read_call(call.string()); }).find("seq: expected an integer, found 1e+30"), std::string::npos);
  // A string or bool field of another type is named too (not nlohmann's "type must be string").
  std::ofstream(call / "call.json") << R"({"format":"mate-dump","version":1,"function":5,"seq":1,"status":"completed","tensor_format":"mate"})";
  EXPECT_NE(expect_error([&] { mate::dump::read_call(call.string()); }).find("call.json: invalid field: function: expected a string, found 5"),
            std::string::npos);
  std::ofstream(call / "call.json") << R"({"format":"mate-dump","version":1,"function":"g","seq":1,"status":"completed","tensor_format":"mate",)"
                                       R"("inputs":[{"name":"flag","kind":"bool","value":"yes"}]})";
  EXPECT_NE(expect_error([&] { mate::dump::read_call(call.string()); }).find("invalid field: value: expected true or false, found \"yes\""),
            std::string::npos);
}

// A crafted header whose lowest and highest bytes are each within 64 bits but 2^63 + 4 apart
// (f32, strides -2^60 and 2^60 elements): a clear error, not a signed overflow.
TEST_F(TensorFileTest, AnExtentBeyond64BitsIsRejected) {
  const std::string header =
      R"({"format":"mate-tensor","version":1,"dlpack_dtype":{"code":2,"bits":32,"lanes":1},"shape":[2,2],)"
      R"("strides":[-1152921504606846976,1152921504606846976],"byte_offset":0,"device_type":1,"device_id":0,)"
      R"("data_begin":-4611686018427387904,"nbytes":0})";
  std::string file = "MATETNSR";
  for (int i = 0; i < 8; ++i) file.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xff));
  file += header;
  const std::string error = expect_error([&] { mate::dump::parse_mtensor(file, "crafted.mtensor"); });
  EXPECT_NE(error.find("crafted.mtensor: shape and strides overflow 64 bits"), std::string::npos) << error;
}

TEST_F(TensorFileTest, DamagedCallFilesGiveClearErrors) {
  const fs::path call = dir_ / "20260101_000000_000_pid1_call00000001_f";
  fs::create_directories(call);
  EXPECT_NE(expect_error([&] { mate::dump::read_call(call.string()); }).find("call.json is missing"), std::string::npos);
  std::ofstream(call / "call.json") << R"({"format":"mate-dump","version":1,"function":"f","seq":1,"status":"comp)";
  EXPECT_NE(expect_error([&] { mate::dump::read_call(call.string()); }).find("not valid JSON"), std::string::npos);
  std::ofstream(call / "call.json") << R"({"format":"mate-dump","version":1,"function":"f","seq":1,"status":"done","tensor_format":"mate"})";
  EXPECT_NE(expect_error([&] { mate::dump::read_call(call.string()); }).find("unknown status \"done\""), std::string::npos);
  std::ofstream(call / "call.json") << R"({"format":"mate-dump","version":1,"function":"f","seq":1,"status":"completed","tensor_format":"mate",
    "inputs":[{"name":"x","kind":"tensor","file":"../../etc/passwd"}]})";
  EXPECT_NE(expect_error([&] { mate::dump::read_call(call.string()); }).find("outside the call directory"), std::string::npos);
  std::ofstream(call / "call.json") << R"({"format":"mate-dump","version":1,"function":"f","seq":"one","status":"completed","tensor_format":"mate"})";
  EXPECT_NE(expect_error([&] { mate::dump::read_call(call.string()); }).find("invalid field"), std::string::npos);
}

// The names in a directory, sorted (temporaries included).
std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

// A "device" over host memory whose read() stops the process in the middle of a write: before
// its second chunk it tells the test over a pipe, then waits (for the test's SIGKILL).
class StoppingBackend : public mate::testing::HostMemoryDevice {
 public:
  explicit StoppingBackend(int ready_fd) : ready_fd_(ready_fd) {}
  const char* name() const noexcept override { return "stopping"; }
  Status read(void* dst, std::uintptr_t src, std::size_t bytes) noexcept override {
    if (reads + 1 == 2) {
      const char one = 1;
      if (::write(ready_fd_, &one, 1) != 1) std::_Exit(5);
      for (;;) ::pause();
    }
    return HostMemoryDevice::read(dst, src, bytes);
  }

 private:
  int ready_fd_;
};

// SIGKILL in the middle of writing a tensor file leaves nothing under the file's name: only the
// temporary `.<name>.tmp.<pid>`, which no reader names.
TEST_F(TensorFileTest, AProcessKilledMidWriteLeavesNoFileUnderTheName) {
  for (const bool safetensors : {false, true}) {
    SCOPED_TRACE(safetensors ? "safetensors" : "mtensor");
    const fs::path dir = dir_ / (safetensors ? "killed_st" : "killed_mt");
    fs::create_directories(dir);
    const std::string name = safetensors ? "inputs.safetensors" : "big.mtensor";
    const auto child = mate::testing::fork_until_stopped([&](int ready_fd) {
      StoppingBackend backend(ready_fd);
      std::vector<float> data(std::size_t{1} << 20, 2.5f);  // 4 MiB, written in 1 MiB chunks
      std::vector<std::int64_t> shape{static_cast<std::int64_t>(data.size())};
      DLTensor t = dl_view(data.data(), ScalarType::F32, shape, nullptr);
      t.device = {kDLCUDA, 0};
      const mate::dump::ReadOptions o{&backend, std::size_t{1} << 20};
      const fs::path path = dir / name;
      if (safetensors) (void)mate::dump::write_safetensors(path, {{"x", mate::tensor::TensorView(t)}}, o);
      else (void)mate::dump::write_mtensor(path, mate::tensor::TensorView(t), o);
    });
    ASSERT_GT(child.pid, 0);
    const pid_t pid = child.pid;
    const bool stopped = child.stopped;
    const std::string temporary = "." + name + ".tmp." + std::to_string(pid);
    std::vector<std::string> during;
    std::uintmax_t temporary_size = 0;
    if (stopped) {
      during = names_in(dir);
      std::error_code ec;
      temporary_size = fs::file_size(dir / temporary, ec);
    }
    const int status = mate::testing::kill_child(pid);
    ASSERT_TRUE(stopped) << "the child was not stopped mid-write (status " << status << ")";
    // Stopped with the first 1 MiB chunk written, under the temporary name only.
    EXPECT_EQ(during, std::vector<std::string>{temporary});
    EXPECT_GT(temporary_size, std::uintmax_t{1} << 20);
    ASSERT_TRUE(WIFSIGNALED(status));
    EXPECT_EQ(names_in(dir), std::vector<std::string>{temporary}) << "the killed write left only its temporary";
    EXPECT_FALSE(fs::exists(dir / name));
    const std::string error = expect_error([&] {
      if (safetensors) mate::dump::read_safetensors((dir / name).string(), "x");
      else mate::dump::read_mtensor((dir / name).string());
    });
    EXPECT_NE(error.find("cannot open " + (dir / name).string()), std::string::npos) << error;
  }
}

// A file-size limit stops the write: an error naming the file, and neither the file nor its
// temporary is left. SIGXFSZ keeps its default action (kill): the limit is checked before writing.
TEST_F(TensorFileTest, AFileSizeLimitLeavesNeitherTheFileNorATemporary) {
  const fs::path dir = dir_ / "fsize";
  fs::create_directories(dir);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    rlimit lim{1 << 20, 1 << 20};
    ::setrlimit(RLIMIT_FSIZE, &lim);
    std::vector<float> data(std::size_t{1} << 19, 1.0f);  // 2 MiB: over the limit
    std::vector<std::int64_t> shape{static_cast<std::int64_t>(data.size())};
    DLTensor t = dl_view(data.data(), ScalarType::F32, shape, nullptr);
    const std::string mt = (dir / "big.mtensor").string(), st = (dir / "big.safetensors").string();
    mate::dump::WriteResult a = mate::dump::write_mtensor(mt, mate::tensor::TensorView(t));
    mate::dump::WriteResult b = mate::dump::write_safetensors(st, {{"x", mate::tensor::TensorView(t)}});
    const bool named = a.error == "write " + mt + ": File too large" && b.error == "write " + st + ": File too large";
    std::_Exit(a.ok() || b.ok() || a.read_failed || b.read_failed ? 3 : named ? 0 : 4);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "3: a write succeeded, 4: an error does not name the file and the cause";
  EXPECT_TRUE(names_in(dir).empty()) << ::testing::PrintToString(names_in(dir));
}

// A tensor file is always new: an existing file of that name is an error and is left as it was.
TEST_F(TensorFileTest, AnExistingFileIsNeverReplaced) {
  const fs::path dir = dir_ / "existing";
  fs::create_directories(dir);
  std::ofstream(dir / "t.mtensor") << "keep me";
  float one = 1;
  std::vector<std::int64_t> shape{1};
  DLTensor t = dl_view(&one, ScalarType::F32, shape, nullptr);
  mate::dump::WriteResult r = mate::dump::write_mtensor((dir / "t.mtensor").string(), mate::tensor::TensorView(t));
  EXPECT_EQ(r.error, "create " + (dir / "t.mtensor").string() + ": File exists");
  EXPECT_EQ(read_file(dir / "t.mtensor"), "keep me");
  EXPECT_EQ(names_in(dir), std::vector<std::string>{"t.mtensor"});
}

// A temporary left by a process killed mid-write whose pid this process now has (pids are
// reused) does not stop the write: it is replaced, and the file appears complete.
TEST_F(TensorFileTest, ALeftoverTemporaryWithThisPidIsReplaced) {
  const fs::path dir = dir_ / "leftover";
  fs::create_directories(dir);
  const fs::path path = dir / "t.mtensor";
  std::ofstream(dir / (".t.mtensor.tmp." + std::to_string(getpid()))) << "half a file";
  float one = 1.5f;
  std::vector<std::int64_t> shape{1};
  DLTensor t = dl_view(&one, ScalarType::F32, shape, nullptr);
  mate::dump::WriteResult r = mate::dump::write_mtensor(path.string(), mate::tensor::TensorView(t));
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(names_in(dir), std::vector<std::string>{"t.mtensor"});
  const mate::dump::TensorRecord back = mate::dump::read_mtensor(path.string());
  ASSERT_EQ(back.data.size(), sizeof(float));
  float value = 0;
  std::memcpy(&value, back.data.data(), sizeof value);
  EXPECT_EQ(value, 1.5f);
}

}  // namespace

namespace {

// Readers open regular files only: a FIFO in place of a tensor file is an error at once (not a
// replay blocked forever), a link to /dev/zero is not followed (not read until memory runs out).
TEST_F(TensorFileTest, ReadersOpenRegularFilesOnlyAndFollowNoLink) {
  const std::string fifo = (dir_ / "t.mtensor").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string a = expect_error([&] { mate::dump::read_mtensor(fifo); });
  EXPECT_NE(a.find(fifo + " is a FIFO, not a regular file"), std::string::npos) << a;
  const std::string b = expect_error([&] { mate::dump::read_safetensors(fifo, "a"); });
  EXPECT_NE(b.find(fifo + " is a FIFO"), std::string::npos) << b;
  for (const char* device : {"/dev/zero", "/dev/urandom"}) {
    const std::string link = (dir_ / (std::string("link") + (device + 5))).string();
    fs::create_symlink(device, link);
    const std::string e = expect_error([&] { mate::dump::read_mtensor(link); });
    EXPECT_NE(e.find(link + " is a symbolic link"), std::string::npos) << e;
  }
  // A link to a good file is not followed either: it may lead anywhere.
  std::vector<float> buf(4, 1.0f);
  std::vector<std::int64_t> shape{4};
  DLTensor t = dl_view(buf.data(), ScalarType::F32, shape);
  const std::string good = (dir_ / "good.mtensor").string(), link = (dir_ / "link.mtensor").string();
  ASSERT_TRUE(mate::dump::write_mtensor(good, mate::tensor::TensorView(t)).ok());
  EXPECT_EQ(mate::dump::read_mtensor(good).data.size(), 16u);
  fs::create_symlink(good, link);
  EXPECT_NE(expect_error([&] { mate::dump::read_mtensor(link); }).find("is a symbolic link"), std::string::npos);
}

// A valid header describing more data than memory allows: "out of memory", with the bytes
// needed, never "truncated". The file is sparse (6e9 bytes, none allocated); the child reads it
// under a 2 GiB address-space limit.
TEST_F(TensorFileTest, ATensorThatDoesNotFitInMemoryIsOutOfMemoryNotTruncated) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "the sanitizers reserve more address space than the limit allows";
#endif
  constexpr std::uint64_t kBytes = 6'000'000'000;
  const std::string header = R"({"format":"mate-tensor","version":1,"dtype":"u8","dlpack_dtype":{"code":1,"bits":8,"lanes":1},)"
                             R"("shape":[6000000000],"strides":[1],"byte_offset":0,"device":"cpu","device_type":1,)"
                             R"("device_id":0,"data_begin":0,"nbytes":6000000000})";
  std::string prefix(mate::dump::kTensorMagic, 8);
  for (int i = 0; i < 8; ++i) prefix.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xff));
  const std::string path = (dir_ / "huge.mtensor").string(), err = (dir_ / "err.txt").string();
  {
    std::ofstream(path, std::ios::binary) << prefix << header;
  }
  fs::resize_file(path, prefix.size() + header.size() + kBytes);
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    rlimit lim{std::uint64_t{2} << 30, RLIM_INFINITY};
    if (::setrlimit(RLIMIT_AS, &lim) != 0) std::_Exit(90);
    std::string message = "no error";
    try {
      (void)mate::dump::read_mtensor(path);
    } catch (const std::exception& e) {
      message = e.what();
    }
    std::ofstream(err) << message;
    std::_Exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  const std::string message = read_file(err);
  EXPECT_NE(message.find(path + ": out of memory: reading it needs 6000000000 bytes"), std::string::npos) << message;
  EXPECT_EQ(message.find("truncated"), std::string::npos) << message;
}

}  // namespace
