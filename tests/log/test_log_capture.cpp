// Logging a call whose stream is being captured into a CUDA/MUSA graph: at level 5 and above the
// records must not read device memory (a synchronous copy would invalidate the capture), and
// say why. Device memory and the capture state come from the fake driver, under both prefixes.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "dl_tensor.hpp"
#include "mate/config.hpp"
#include "mate/device/driver.hpp"
#include "mate/device/vendors.hpp"
#include "mate/dump/call_record.hpp"
#include "mate/dump/dump.hpp"
#include "mate/log/api.hpp"
#include "mate/tensor/memory.hpp"
#include "log_to_file.hpp"
#include "temp_dir.hpp"

namespace {

using mate::config::ScopedOverride;
using mate::config::Var;
using mate::device::Kind;

// The fake's capture hooks, from the instance the backend loaded (same path, same handle).
struct CaptureHooks {
  void (*set)(void*, int) = nullptr;
  int (*get)(void*) = nullptr;
};
const CaptureHooks& hooks() {
  static CaptureHooks h = [] {
    CaptureHooks r;
    void* lib = dlopen(MATE_FAKE_DRIVER_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return r;
    r.set = reinterpret_cast<void (*)(void*, int)>(dlsym(lib, "fake_driver_set_capture_status"));
    r.get = reinterpret_cast<int (*)(void*)>(dlsym(lib, "fake_driver_capture_status"));
    return r;
  }();
  return h;
}

void* const kCapturing = reinterpret_cast<void*>(0x5100);  // the stream being captured
void* const kOther = reinterpret_cast<void*>(0x5200);      // another stream

// A call with its stream named, in both forms.
float device_call(const DLTensor* x, const DLTensor* host, void* stream) {
  return MATE_API("Device.call", x, host).stream(stream).outputs(MATE_ARGS(x)).run([&] { return 1.5f; });
}
void device_scope(const DLTensor* x, void* stream) {
  MATE_API_SCOPE_ON_STREAM(stream, "Device.scope", x);
  MATE_API_OUTPUTS(x);
}
// A call that names no stream: the device's default stream is asked about.
void default_stream_call(const DLTensor* x) { MATE_API("Device.default", x).run([] {}); }

class LogDuringCapture : public ::testing::TestWithParam<Kind>, protected mate::testing::LogToFile {
 protected:
  LogDuringCapture() : LogToFile("mate_log_capture") {}
  void SetUp() override {
    ASSERT_NE(hooks().set, nullptr) << "fake driver hooks: " << dlerror();
    ASSERT_NE(hooks().get, nullptr);
    std::string reason;
    backend_ = mate::device::open_driver_backend(GetParam(), 0, &reason);
    ASSERT_NE(backend_, nullptr) << reason;
    mate::tensor::set_device_backend(GetParam(), backend_.get());
    bytes_ = backend_->granularity();
    ASSERT_TRUE(backend_->reserve(bytes_, &base_).ok());
    ASSERT_TRUE(backend_->map(base_, bytes_).ok());
    const float values[4] = {1, 2, 3, 4};
    ASSERT_TRUE(backend_->write(base_, values, sizeof values).ok());
    const DLDeviceType type = GetParam() == Kind::Cuda ? kDLCUDA : mate::device::kDLMUSA;
    device_ = mate::testing::dl_view(reinterpret_cast<void*>(base_), mate::tensor::ScalarType::F32, shape_, nullptr, 0,
                                     DLDevice{type, 0});
  }
  void TearDown() override {
    hooks().set(kCapturing, 0);
    restore();
    mate::dump::reconfigure();
    if (backend_) {
      mate::tensor::set_device_backend(GetParam(), nullptr);
      backend_->unmap(base_, bytes_);
      backend_->release(base_, bytes_);
    }
  }
  std::string note() const {
    return std::string("stats skipped: ") + mate::device::kind_title(GetParam()) + " graph capture in progress";
  }

  ScopedOverride fake_{Var::MATE_FAKE_DRIVER_PATH, MATE_FAKE_DRIVER_LIBRARY};
  std::unique_ptr<mate::device::DriverBackend> backend_;
  std::size_t bytes_ = 0;
  std::uintptr_t base_ = 0;
  std::vector<std::int64_t> shape_{4};
  DLTensor device_{};
  mate::testing::F32Tensor host_{{5, 6}, {2}};
};

TEST_P(LogDuringCapture, OutsideACaptureDeviceTensorsHaveStatistics) {
  configure(5);
  EXPECT_EQ(device_call(&device_, &host_.dl, kCapturing), 1.5f);
  const std::string text = log();
  EXPECT_NE(text.find("    stats: min 1 max 4 mean 2.5 nan 0 inf 0\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("skipped"), std::string::npos) << text;
}

TEST_P(LogDuringCapture, NamedStreamBeingCapturedLogsMetadataOnlyAndLeavesTheCaptureIntact) {
  configure(5);
  hooks().set(kCapturing, 1);
  EXPECT_EQ(device_call(&device_, &host_.dl, kCapturing), 1.5f);
  device_scope(&device_, kCapturing);
  EXPECT_EQ(hooks().get(kCapturing), 1) << "the capture was invalidated by a device read";
  const std::string text = log();
  const std::string skipped = "    " + note() + "\n";
  std::size_t n = 0;
  for (std::size_t at = text.find(skipped); at != std::string::npos; at = text.find(skipped, at + 1)) ++n;
  EXPECT_EQ(n, 4u) << "x in the inputs and outputs of both calls:\n" << text;
  EXPECT_EQ(text.find("stats: min 1"), std::string::npos) << text;
  EXPECT_NE(text.find("    stats: min 5 max 6 mean 5.5"), std::string::npos) << "host tensors still have statistics\n"
                                                                               << text;
  EXPECT_NE(text.find("  x: tensor f32 [4] strides [1] " + std::string(mate::device::kind_name(GetParam())) + ":0"),
            std::string::npos)
      << "the metadata is all there\n" << text;
}

TEST_P(LogDuringCapture, JsonSaysWhyStatisticsAreMissing) {
  configure(5, "json");
  hooks().set(kCapturing, 1);
  device_call(&device_, &host_.dl, kCapturing);
  EXPECT_EQ(hooks().get(kCapturing), 1);
  std::istringstream lines(log());
  std::string first;
  std::getline(lines, first);
  const auto j = nlohmann::json::parse(first);
  EXPECT_EQ(j["args"][0]["stats_unavailable"],
            std::string("skipped: ") + mate::device::kind_title(GetParam()) + " graph capture in progress");
  EXPECT_FALSE(j["args"][0].contains("stats"));
  EXPECT_EQ(j["args"][1]["stats"]["max"], 6.0);
}

TEST_P(LogDuringCapture, WithoutANamedStreamTheDefaultStreamIsAsked) {
  configure(5);
  hooks().set(kOther, 1);  // a blocking stream captures: the legacy default stream cannot be used
  default_stream_call(&device_);
  EXPECT_EQ(hooks().get(kOther), 1);
  hooks().set(kOther, 0);
  EXPECT_NE(log().find("    " + note() + "\n"), std::string::npos) << log();
}

TEST_P(LogDuringCapture, ANamedStreamNotCapturingIsReadUnlessTheDefaultStreamIsBlocked) {
  configure(5);
  device_call(&device_, &host_.dl, kOther);
  EXPECT_NE(log().find("stats: min 1 max 4"), std::string::npos) << log();
  hooks().set(kCapturing, 1);  // another (blocking) stream captures: a synchronous copy would break it
  device_call(&device_, &host_.dl, kOther);
  EXPECT_EQ(hooks().get(kCapturing), 1);
  EXPECT_NE(log().find("    " + note() + "\n"), std::string::npos) << log();
}

TEST_P(LogDuringCapture, LevelThreeAsksNothingAndReadsNothing) {
  configure(3);
  hooks().set(kCapturing, 1);
  device_call(&device_, &host_.dl, kCapturing);
  EXPECT_EQ(hooks().get(kCapturing), 1);
  EXPECT_EQ(log().find("stats"), std::string::npos) << log();
}

// A level-10 dump of a captured call: call.json with every argument's metadata, the host
// tensor's data, and on the device tensor why its data was not read; the capture intact.
TEST_P(LogDuringCapture, DumpOfACapturedCallHoldsMetadataAndHostDataOnly) {
  configure(10);
  const std::string root = (dir_ / "dumps").string();
  overrides_.push_back(std::make_unique<ScopedOverride>(Var::MATE_DUMP_DIR, root));
  mate::log::reconfigure();
  mate::dump::reconfigure();
  hooks().set(kCapturing, 1);
  ::testing::internal::CaptureStderr();
  device_call(&device_, &host_.dl, kCapturing);
  ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(hooks().get(kCapturing), 1) << "the capture was invalidated by the dump";
  std::vector<std::string> calls = mate::dump::find_call_dirs(root);
  ASSERT_EQ(calls.size(), 1u);
  std::ifstream in(calls[0] + "/call.json");
  const auto call = nlohmann::json::parse(in);
  const auto& inputs = call["inputs"];
  ASSERT_EQ(inputs.size(), 2u) << call.dump(2);
  EXPECT_EQ(inputs[0]["name"], "x");
  EXPECT_EQ(inputs[0]["shape"], nlohmann::json::array({4}));
  EXPECT_EQ(inputs[0]["error"],
            std::string("not read: ") + mate::device::kind_title(GetParam()) + " graph capture in progress")
      << call.dump(2);
  EXPECT_FALSE(inputs[0].contains("file")) << call.dump(2);
  ASSERT_TRUE(inputs[1].contains("file")) << "the host tensor's data is saved\n" << call.dump(2);
  EXPECT_TRUE(std::filesystem::exists(calls[0] + "/" + inputs[1]["file"].get<std::string>()));
}

INSTANTIATE_TEST_SUITE_P(BothPrefixes, LogDuringCapture, ::testing::Values(Kind::Cuda, Kind::Musa),
                         [](const auto& info) { return std::string(mate::device::kind_name(info.param)); });

}  // namespace
