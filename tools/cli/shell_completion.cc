// SPDX-License-Identifier: MIT
#include "tools/cli/shell_completion.h"

#include <algorithm>
#include <sstream>
#include <vector>

namespace vramflow {
namespace {

// What one command path completes to.
struct CommandTable {
  std::string path;  // "" for the program itself, else "bench codecs"
  std::vector<std::string> subcommands;
  std::vector<std::string> options;
  std::vector<std::string> value_options;  // those that take the next word as their value
};

// Names go into the script unquoted: only plain ones do (every name CLI11
// is given here is one; anything else is left out rather than escaped).
bool PlainWord(const std::string& word) {
  if (word.empty()) return false;
  for (char c : word)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
          c == '.'))
      return false;
  return true;
}

void AddOnce(std::vector<std::string>* words, const std::string& word) {
  if (std::find(words->begin(), words->end(), word) == words->end()) words->push_back(word);
}

// `app`'s own options and those of its option groups (nameless subcommands).
void AddOptions(const CLI::App& app, CommandTable* table) {
  for (const CLI::Option* option : app.get_options()) {
    if (!option->nonpositional()) continue;
    const bool takes_value = option->get_items_expected_max() > 0;
    auto add = [&](const std::string& name) {
      if (!PlainWord(name)) return;
      AddOnce(&table->options, name);
      if (takes_value) AddOnce(&table->value_options, name);
    };
    for (const std::string& name : option->get_snames()) add("-" + name);
    for (const std::string& name : option->get_lnames()) add("--" + name);
  }
  for (const CLI::App* group : app.get_subcommands([](const CLI::App* sub) { return sub->get_name().empty(); }))
    AddOptions(*group, table);
}

void Walk(const CLI::App& app, const std::string& path, const CommandTable* parent, std::vector<CommandTable>* out) {
  CommandTable table;
  table.path = path;
  AddOptions(app, &table);
  // A parent that takes unknown options back from its subcommands
  // (fallthrough) lets its own options follow them.
  if (parent && app.get_fallthrough() && !parent->path.empty()) {
    for (const std::string& name : parent->options) AddOnce(&table.options, name);
    for (const std::string& name : parent->value_options) AddOnce(&table.value_options, name);
  }
  // Named subcommands; hidden ones (no help group, as `completion` itself) are not offered.
  std::vector<const CLI::App*> subs;
  for (const CLI::App* sub :
       app.get_subcommands([](const CLI::App* s) { return !s->get_name().empty() && !s->get_group().empty(); }))
    if (PlainWord(sub->get_name())) {
      subs.push_back(sub);
      table.subcommands.push_back(sub->get_name());
    }
  out->push_back(table);
  const CommandTable copy = out->back();
  for (const CLI::App* sub : subs)
    Walk(*sub, path.empty() ? sub->get_name() : path + " " + sub->get_name(), &copy, out);
}

std::string Join(const std::vector<std::string>& words) {
  std::string joined;
  for (const std::string& word : words) joined += (joined.empty() ? "" : " ") + word;
  return joined;
}

// A shell function name from the program's name (criu-image-streamer ->
// _criu_image_streamer).
std::string FunctionName(const std::string& program) {
  std::string name = "_";
  for (char c : program) name += (c == '-' || c == '.') ? '_' : c;
  return name;
}

// The tables as one function, in the syntax bash and zsh share:
// `NAME_table subs|opts|vals PATH` prints the words.
void WriteTable(const std::vector<CommandTable>& tables, const std::string& function, std::ostream& out) {
  out << function << "_table() {  # KIND PATH: subs, opts or vals (options taking a value) of command PATH\n"
      << "  case \"$1:$2\" in\n";
  for (const CommandTable& t : tables) {
    if (!t.subcommands.empty()) out << "    \"subs:" << t.path << "\") echo \"" << Join(t.subcommands) << "\" ;;\n";
    if (!t.options.empty()) out << "    \"opts:" << t.path << "\") echo \"" << Join(t.options) << "\" ;;\n";
    if (!t.value_options.empty()) out << "    \"vals:" << t.path << "\") echo \"" << Join(t.value_options) << "\" ;;\n";
  }
  out << "  esac\n}\n";
}

// Finds the command path among the words before the cursor: a word that is
// a subcommand of the path so far extends it; the word after an option that
// takes a value is that value. Leaves `cmd` and `skip` (1: the cursor is on
// an option's value) set. WORDS and FIRST name the shell's word array and
// the index of the first word after the program.
void WritePathScan(const std::string& function, const std::string& words, const std::string& first,
                   const std::string& current, std::ostream& out) {
  out << "  local cmd=\"\" w i skip=0\n"
      << "  for ((i = " << first << "; i < " << current << "; i++)); do\n"
      << "    w=${" << words << "[i]}\n"
      << "    if ((skip)); then skip=0; continue; fi\n"
      << "    case \"$w\" in\n"
      << "      --*=*) continue ;;\n"
      << "      -*) case \" $(" << function << "_table vals \"$cmd\") \" in *\" $w \"*) skip=1 ;; esac; continue ;;\n"
      << "    esac\n"
      << "    case \" $(" << function << "_table subs \"$cmd\") \" in *\" $w \"*) cmd=${cmd:+$cmd }$w ;; esac\n"
      << "  done\n";
}

}  // namespace

std::string ShellCompletion(const CLI::App& app, const std::string& program, const std::string& shell) {
  if (shell != "bash" && shell != "zsh") return "";
  std::vector<CommandTable> tables;
  Walk(app, "", nullptr, &tables);
  const std::string function = FunctionName(program);
  std::ostringstream out;
  if (shell == "zsh") out << "#compdef " << program << "\n";
  out << "# " << shell << " completion for " << program << ", written by `" << program << " completion " << shell
      << "` from the command's own definition.\n";
  WriteTable(tables, function, out);
  out << function << "() {\n";
  if (shell == "bash") {
    WritePathScan(function, "COMP_WORDS", "1", "COMP_CWORD", out);
    out << "  local cur=${COMP_WORDS[COMP_CWORD]}\n"
        << "  COMPREPLY=()\n"
        << "  ((skip)) && return 0  # an option's value: file names (complete -o default)\n"
        << "  if [[ $cur == -* ]]; then\n"
        << "    COMPREPLY=($(compgen -W \"$(" << function << "_table opts \"$cmd\")\" -- \"$cur\"))\n"
        << "  else\n"
        << "    COMPREPLY=($(compgen -W \"$(" << function << "_table subs \"$cmd\")\" -- \"$cur\"))\n"
        << "  fi\n"
        << "}\n"
        << "complete -o default -F " << function << " " << program << "\n";
  } else {
    WritePathScan(function, "words", "2", "CURRENT", out);
    out << "  if ((skip)); then _files; return; fi\n"
        << "  if [[ $PREFIX == -* ]]; then\n"
        << "    compadd -- ${=\"$(" << function << "_table opts \"$cmd\")\"}\n"
        << "  else\n"
        << "    local -a subs\n"
        << "    subs=(${=\"$(" << function << "_table subs \"$cmd\")\"})\n"
        << "    if (($#subs)); then compadd -- $subs; else _files; fi\n"
        << "  fi\n"
        << "}\n"
        << function << " \"$@\"\n";
  }
  return out.str();
}

}  // namespace vramflow
