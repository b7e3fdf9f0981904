// SPDX-License-Identifier: MIT
// The layering stated at the top of CMakeLists.txt, checked on the sources and
// on the built binaries (issue 52): a folder includes headers of its own
// library and of the libraries listed above it only, its library links only
// those, and the shipped binaries carry none of the tests' stand-ins
// (amdgpu_plugin.so no simulator, vramflow no simulated KFD and no CRIU
// stand-in; the demo's simulated GPU stays).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/test_util.h"

namespace vramflow {
namespace {

namespace fs = std::filesystem;

// One row of the table: `#   vramflow_net  transport/net/  TCP/UNIX, ...  <- transport/core`.
struct Library {
  std::string name;                 // vramflow_net
  std::string folder;               // transport/net/
  std::vector<std::string> denied;  // the folders after "<- everything but", each ending in '/'
};

// The product's folders; tests/ is not product code, and sim/criu/ (the CRIU
// stand-in, an executable for the tests of no library) may use everything.
const char* const kProductFolders[] = {"common",         "codecs", "datagen", "transport", "streamer",
                                       "image_streamer", "plugin", "sim",     "tools"};
const char kFreeFolder[] = "sim/criu/";

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The table's rows, in its order; empty if CMakeLists.txt has none.
std::vector<Library> ParseLibraryTable(const std::string& cmake_lists) {
  static const std::regex kRow(R"(^#\s+(vramflow_\w+)\s+([a-z0-9_/]+/)\s+(.*)$)");
  std::vector<Library> table;
  std::istringstream lines(cmake_lists);
  for (std::string line; std::getline(lines, line);) {
    std::smatch row;
    if (!std::regex_match(line, row, kRow)) continue;
    Library library{row[1], row[2], {}};
    const std::string rest = row[3];
    const size_t but = rest.find("<- everything but ");
    if (but != std::string::npos) {
      std::istringstream denied(rest.substr(but + 18));
      for (std::string folder; std::getline(denied >> std::ws, folder, ',');) {
        folder.erase(folder.find_last_not_of(" \t") + 1);
        if (!folder.empty()) library.denied.push_back(folder.back() == '/' ? folder : folder + "/");
      }
    }
    table.push_back(library);
  }
  return table;
}

bool StartsWith(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

// The row whose folder is the deepest one holding `path` (streamer/format/x.h
// is streamer/format/'s, streamer/x.h streamer/'s), or -1.
int RowOf(const std::vector<Library>& table, const std::string& path) {
  int best = -1;
  for (size_t i = 0; i < table.size(); ++i) {
    if (StartsWith(path, table[i].folder) && (best < 0 || table[i].folder.size() > table[best].folder.size()))
      best = static_cast<int>(i);
  }
  return best;
}

// What is wrong with one source file's project includes (`#include "dir/..."`
// of a folder of `root`), one line per include: file, line, include, rule.
std::vector<std::string> IncludeViolations(const std::vector<Library>& table, const std::string& root,
                                           const std::string& file, const std::string& text) {
  static const std::regex kInclude(R"(^\s*#\s*include\s*"(([a-z_]+)/[^"]+)\")");
  std::vector<std::string> found;
  const int own = RowOf(table, file);
  // A file of no library is reported by TableNamesEveryProductFolder.
  if (own < 0 || StartsWith(file, kFreeFolder)) return found;
  std::istringstream lines(text);
  int number = 0;
  for (std::string line; std::getline(lines, line);) {
    ++number;
    std::smatch include;
    if (!std::regex_search(line, include, kInclude) || !fs::is_directory(root + "/" + include[2].str())) continue;
    const std::string header = include[1];
    const std::string where = file + ":" + std::to_string(number) + ": #include \"" + header + "\": ";
    const Library& mine = table[own];
    const int theirs = RowOf(table, header);
    if (theirs < 0) {
      found.push_back(where + "a header of no library in CMakeLists.txt's table (only " + kFreeFolder +
                      " and tests/ may include one)");
    } else if (theirs > own) {
      found.push_back(where + mine.folder + " (" + mine.name + ") may include only its own folder and those of the " +
                      "libraries listed above it in CMakeLists.txt; " + table[theirs].folder + " (" +
                      table[theirs].name + ") is listed below it");
    } else {
      for (const std::string& denied : mine.denied) {
        if (StartsWith(header, denied))
          found.push_back(where + mine.folder + " (" + mine.name + ") may not include " + denied +
                          ": its row in CMakeLists.txt's table excludes it");
      }
    }
  }
  return found;
}

// The product's sources (.h, .cc), relative to `root`, sorted.
std::vector<std::string> ProductSources(const std::string& root) {
  std::vector<std::string> files;
  for (const char* folder : kProductFolders) {
    for (const fs::directory_entry& entry : fs::recursive_directory_iterator(root + "/" + folder)) {
      const std::string ext = entry.path().extension();
      if (entry.is_regular_file() && (ext == ".h" || ext == ".cc"))
        files.push_back(fs::relative(entry.path(), root).string());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

class Layering : public ::testing::Test {
 protected:
  void SetUp() override {
    table_ = ParseLibraryTable(ReadText(root_ + "/CMakeLists.txt"));
    ASSERT_GE(table_.size(), 10u) << root_ << "/CMakeLists.txt: no library table at its top";
  }
  const std::string root_ = VRAMFLOW_SOURCE_DIR;
  std::vector<Library> table_;
};

// The table is true: each library is a target of CMakeLists.txt, each folder
// exists, and every product source lies in a folder of the table.
TEST_F(Layering, TableNamesEveryProductFolder) {
  const std::string cmake_lists = ReadText(root_ + "/CMakeLists.txt");
  for (const Library& library : table_) {
    EXPECT_NE(cmake_lists.find("add_library(" + library.name + " "), std::string::npos) << library.name;
    EXPECT_TRUE(fs::is_directory(root_ + "/" + library.folder)) << library.name << ": " << library.folder;
  }
  for (const std::string& file : ProductSources(root_)) {
    EXPECT_TRUE(StartsWith(file, kFreeFolder) || RowOf(table_, file) >= 0)
        << file << ": its folder is in no library of CMakeLists.txt's table";
  }
}

TEST_F(Layering, SourcesIncludeOnlyLibrariesAboveThem) {
  const std::vector<std::string> files = ProductSources(root_);
  ASSERT_GT(files.size(), 100u) << root_;
  for (const std::string& file : files) {
    for (const std::string& violation : IncludeViolations(table_, root_, file, ReadText(root_ + "/" + file)))
      ADD_FAILURE() << violation;
  }
}

// CMakeLists.txt's links keep the order too: a library of the table links
// only libraries listed above it, and none its row excludes.
TEST_F(Layering, LibrariesLinkOnlyLibrariesAboveThem) {
  const std::string cmake_lists = ReadText(root_ + "/CMakeLists.txt");
  static const std::regex kLink(R"(target_link_libraries\((vramflow_\w+)([^)]*)\))");
  static const std::regex kName(R"(vramflow_\w+)");
  auto row_named = [&](const std::string& name) {
    for (size_t i = 0; i < table_.size(); ++i) {
      if (table_[i].name == name) return static_cast<int>(i);
    }
    return -1;
  };
  int links = 0;
  const std::sregex_iterator end;
  for (std::sregex_iterator link(cmake_lists.begin(), cmake_lists.end(), kLink); link != end; ++link) {
    const int own = row_named((*link)[1]);
    if (own < 0) continue;
    ++links;
    const std::string used = (*link)[2];
    for (std::sregex_iterator name(used.begin(), used.end(), kName); name != end; ++name) {
      const int theirs = row_named(name->str());
      if (theirs < 0) continue;
      EXPECT_LT(theirs, own) << table_[own].name << " links " << name->str()
                             << ", listed below it in CMakeLists.txt's table";
      for (const std::string& denied : table_[own].denied) {
        EXPECT_FALSE(StartsWith(table_[theirs].folder, denied))
            << table_[own].name << " links " << name->str() << ": its row in CMakeLists.txt's table excludes "
            << denied;
      }
    }
  }
  EXPECT_GE(links, static_cast<int>(table_.size())) << "CMakeLists.txt links fewer libraries than its table lists";
}

// The check itself: an include from a library below, from one the row
// excludes, or from no library at all is caught; one from above is not.
TEST_F(Layering, TheCheckCatchesAnIncludeFromBelow) {
  const std::string text =
      "#include \"common/status.h\"\n"
      "#include \"streamer/base/base_store.h\"\n"
      "#include \"tests/support/test_util.h\"\n"
      "#include <vector>\n";
  const std::vector<std::string> found = IncludeViolations(table_, root_, "streamer/format/x.cc", text);
  ASSERT_EQ(found.size(), 2u) << ::testing::PrintToString(found);
  EXPECT_NE(found[0].find("streamer/format/x.cc:2: #include \"streamer/base/base_store.h\": streamer/format/ "
                          "(vramflow_format) may include only"),
            std::string::npos)
      << found[0];
  EXPECT_NE(found[1].find(":3: #include \"tests/support/test_util.h\": a header of no library"), std::string::npos)
      << found[1];
  const std::string sims = "#include \"sim/kfd/sim_kfd.h\"\n#include \"sim/gpu/sim_device.h\"\n";
  const std::vector<std::string> tools = IncludeViolations(table_, root_, "tools/x.cc", sims);
  ASSERT_EQ(tools.size(), 1u) << ::testing::PrintToString(tools);
  EXPECT_NE(tools[0].find("tools/x.cc:1: #include \"sim/kfd/sim_kfd.h\": tools/ (vramflow_tools) may not include "
                          "sim/kfd/"),
            std::string::npos)
      << tools[0];
  EXPECT_TRUE(IncludeViolations(table_, root_, "sim/criu/x.cc", text).empty());
}

// Names of the stand-ins, as `nm -C` shows them: the tests' simulated KFD
// (sim/kfd/), the CRIU stand-in (sim/criu/), the demo's simulated GPU (sim/gpu/).
const char* const kSimKfd[] = {"SimKfd", "sim_wire::", "SimGpuBackend"};
const char* const kCriuStandIn[] = {"CriuStreamerClient", "vramflow::ImageStreamer::", "TaskFdRestore",
                                    "img_streamer_open", "find_unused_fd_pid"};
const char* const kSimGpu[] = {"SimDevice", "SimProcess", "CreateSimBo", "ApplyTrainingStep"};

// The demangled names `binary` defines, one a line: its whole symbol table
// (.symtab), so hidden symbols count too (the plugin exports one).
std::string DefinedSymbols(const std::string& binary) {
  std::string out;
  const int rc = testing::RunCommand("nm -C --defined-only '" + binary + "'", &out);
  EXPECT_EQ(rc, 0) << binary << ": " << out.substr(0, 2000);
  return out;
}

// The lines of `symbols` naming any of `names`, at most a few.
template <size_t N>
std::vector<std::string> Carrying(const std::string& symbols, const char* const (&names)[N]) {
  std::vector<std::string> found;
  std::istringstream lines(symbols);
  for (std::string line; std::getline(lines, line) && found.size() < 5;) {
    for (const char* name : names) {
      if (line.find(name) != std::string::npos) {
        found.push_back(line);
        break;
      }
    }
  }
  return found;
}

TEST_F(Layering, ProductBinariesCarryNoStandIns) {
  std::string out;
  if (testing::RunCommand("command -v nm", &out) != 0) GTEST_SKIP() << "nm (binutils) is not installed";
  const std::vector<std::string> none;
  const std::string plugin = DefinedSymbols(VRAMFLOW_PRODUCT_PLUGIN);
  const std::string binary = DefinedSymbols(VRAMFLOW_BINARY);
  // Symbol tables there to read (not stripped), or the checks below pass on nothing.
  ASSERT_NE(plugin.find("OpenPluginBackend"), std::string::npos) << VRAMFLOW_PRODUCT_PLUGIN << ":\n"
                                                                 << plugin.substr(0, 2000);
  ASSERT_NE(binary.find(" main\n"), std::string::npos) << VRAMFLOW_BINARY << ":\n" << binary.substr(0, 2000);

  EXPECT_EQ(Carrying(plugin, kSimKfd), none) << VRAMFLOW_PRODUCT_PLUGIN << ": the simulated KFD";
  EXPECT_EQ(Carrying(plugin, kSimGpu), none) << VRAMFLOW_PRODUCT_PLUGIN << ": the simulated GPU";
  EXPECT_EQ(Carrying(plugin, kCriuStandIn), none) << VRAMFLOW_PRODUCT_PLUGIN << ": the CRIU stand-in";
  EXPECT_EQ(Carrying(binary, kSimKfd), none) << VRAMFLOW_BINARY << ": the simulated KFD";
  EXPECT_EQ(Carrying(binary, kCriuStandIn), none) << VRAMFLOW_BINARY << ": the CRIU stand-in";
  // `vramflow demo` and `bench pipeline` run on the simulated GPU: it stays, every name of it.
  for (const char* name : kSimGpu)
    EXPECT_TRUE(binary.find(name) != std::string::npos) << VRAMFLOW_BINARY << " defines no " << name;

  // The same check on the binaries built for the tests finds what they carry,
  // and every name above is one they define: the test build of the plugin
  // carries the simulated KFD, the CRIU host the simulated KFD's server and
  // the CRIU stand-in.
  const std::string test_plugin = DefinedSymbols(VRAMFLOW_PLUGIN);
  EXPECT_NE(Carrying(test_plugin, kSimKfd), none) << VRAMFLOW_PLUGIN;
  const std::string host = DefinedSymbols(VRAMFLOW_CRIU_HOST);
  EXPECT_NE(Carrying(host, kCriuStandIn), none) << VRAMFLOW_CRIU_HOST;
  for (const char* name : kSimKfd) {
    EXPECT_TRUE(test_plugin.find(name) != std::string::npos || host.find(name) != std::string::npos)
        << "no test binary defines " << name;
  }
  for (const char* name : kCriuStandIn)
    EXPECT_TRUE(host.find(name) != std::string::npos) << VRAMFLOW_CRIU_HOST << " defines no " << name;
}

}  // namespace
}  // namespace vramflow
