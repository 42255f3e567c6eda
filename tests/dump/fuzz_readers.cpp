// libFuzzer target over the dump readers: whatever the bytes, parse_torch_save, parse_mtensor,
// parse_safetensors and parse_call either succeed or throw DumpError. Any other exception, crash, leak or
// sanitizer report is a finding. The first byte picks the reader.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "mate/dump/call_record.hpp"
#include "mate/dump/tensor_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    switch (data[0] % 4) {
      case 0: {
        mate::dump::TensorRecord r = mate::dump::parse_mtensor(in);
        // A record that parsed must be viewable over its bytes.
        (void)r.view_over(reinterpret_cast<std::uintptr_t>(r.data.data()));
        break;
      }
      case 1:
        (void)mate::dump::parse_safetensors(in, "a");
        break;
      case 2:
        (void)mate::dump::parse_call(in, "/dumps/call");
        break;
      default: {
        mate::dump::TensorRecord r = mate::dump::parse_torch_save(in);
        (void)r.view_over(reinterpret_cast<std::uintptr_t>(r.data.data()));
        break;
      }
    }
  } catch (const mate::dump::DumpError&) {
  }
  return 0;
}
