// Checks (or, with --write, regenerates) the log samples in docs/logging.md.
//
// A sample is a fenced block preceded by a marker naming the variables to run the demo with:
//   <!-- sample: MATE_LOGLEVEL=3 MATE_LOGFORMAT=text -->
// The demo's stdout is normalized (timestamps, pid/tid, durations, arena addresses) so that the
// comparison is exact and stable.
#include <cstdio>
#include <functional>
#include <map>
#include <fstream>
#include <iostream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "subprocess.hpp"

namespace {

mate::testing::RunOptions with_env(std::map<std::string, std::string> env) {
  mate::testing::RunOptions o;
  o.env = std::move(env);
  return o;
}

constexpr std::uintptr_t kDocArena = 0x7e5a00000000;

std::string replace_all(const std::string& text, const std::regex& re,
                        const std::function<std::string(const std::smatch&)>& with) {
  std::string out;
  auto begin = std::sregex_iterator(text.begin(), text.end(), re);
  std::size_t last = 0;
  for (auto it = begin; it != std::sregex_iterator(); ++it) {
    out.append(text, last, static_cast<std::size_t>(it->position()) - last);
    out += with(*it);
    last = static_cast<std::size_t>(it->position() + it->length());
  }
  out.append(text, last);
  return out;
}

std::string normalize(std::string out, std::uintptr_t arena, std::uintptr_t arena_size) {
  auto fixed = [](std::string s) { return [s](const std::smatch&) { return s; }; };
  out = replace_all(out, std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z)"), fixed("2026-01-01T12:00:00.000000Z"));
  out = replace_all(out, std::regex(R"(pid \d+ tid \d+)"), fixed("pid 4242 tid 4242"));
  out = replace_all(out, std::regex(R"("pid":\d+,"tid":\d+)"), fixed("\"pid\":4242,\"tid\":4242"));
  out = replace_all(out, std::regex(R"(\((\d+\.\d) us\))"), fixed("(1.5 us)"));
  out = replace_all(out, std::regex(R"("elapsed_us":[0-9.eE+-]+)"), fixed("\"elapsed_us\":1.5"));
  out = replace_all(out, std::regex(R"(0x[0-9a-f]+)"), [&](const std::smatch& m) {
    std::uintptr_t v = std::stoull(m.str(), nullptr, 16);
    if (v < arena || v > arena + arena_size) return m.str();
    char buf[32];
    std::snprintf(buf, sizeof buf, "%#lx", static_cast<unsigned long>(v - arena + kDocArena));
    return std::string(buf);
  });
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string demo, doc;
  bool write = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--demo" && i + 1 < argc) demo = argv[++i];
    else if (a == "--doc" && i + 1 < argc) doc = argv[++i];
    else if (a == "--write") write = true;
    else {
      std::cerr << "usage: log_doc_samples --demo PATH --doc PATH [--write]\n";
      return 2;
    }
  }
  std::ifstream in(doc);
  if (!in) {
    std::cerr << "cannot read " << doc << "\n";
    return 2;
  }
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);

  std::vector<std::string> result;
  int samples = 0, mismatches = 0;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    result.push_back(lines[i]);
    const std::string marker = "<!-- sample:";
    if (lines[i].rfind(marker, 0) != 0) continue;
    ++samples;
    std::map<std::string, std::string> env;
    std::istringstream words(lines[i].substr(marker.size()));
    for (std::string w; words >> w;) {
      if (w == "-->") break;
      env[w.substr(0, w.find('='))] = w.substr(w.find('=') + 1);
    }
    if (i + 1 >= lines.size() || lines[i + 1].rfind("```", 0) != 0) {
      std::cerr << doc << ":" << i + 1 << ": a sample marker must be followed by a fenced block\n";
      return 2;
    }
    result.push_back(lines[++i]);
    std::string expected;
    std::size_t end = i + 1;
    while (end < lines.size() && lines[end] != "```") expected += lines[end++] + "\n";
    if (end == lines.size()) {
      std::cerr << doc << ": unterminated sample block\n";
      return 2;
    }
    auto r = mate::testing::run({demo}, with_env(env));
    unsigned long arena = 0, size = 0;
    if (r.exit_code != 0 || std::sscanf(r.err.c_str(), "arena %lx %lu", &arena, &size) != 2) {
      std::cerr << "log_demo failed (exit " << r.exit_code << "): " << r.err << "\n";
      return 1;
    }
    std::string actual = normalize(r.out, arena, size);
    if (actual != expected) {
      ++mismatches;
      if (!write) {
        std::cerr << doc << ":" << i << ": sample differs from log_demo's output with " << lines[i - 1]
                  << "\n--- docs ---\n" << expected << "--- log_demo ---\n" << actual << "---\n";
      }
    }
    std::istringstream act(actual);
    for (std::string l; std::getline(act, l);) result.push_back(l);
    result.push_back("```");
    i = end;
  }
  if (samples == 0) {
    std::cerr << doc << ": no samples found\n";
    return 1;
  }
  if (write) {
    std::ofstream out(doc);
    for (const auto& l : result) out << l << "\n";
    std::cout << "updated " << mismatches << " of " << samples << " samples in " << doc << "\n";
    return 0;
  }
  if (mismatches > 0) {
    std::cerr << mismatches << " of " << samples << " samples differ; regenerate with: "
              << argv[0] << " --demo " << demo << " --doc " << doc << " --write\n";
    return 1;
  }
  std::cout << samples << " samples match\n";
  return 0;
}
