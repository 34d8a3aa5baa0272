// fib completion bash|zsh: prints a shell completion script made from the command tree itself
// (every subcommand and flag CLI11 knows), so it never falls behind the commands.
#include <fmt/format.h>

#include <iostream>
#include <string>
#include <vector>

#include "cli/commands.h"

namespace fib::cli {

namespace {

// One command of the tree: its path ("report fast-p"), its subcommands and its flags.
struct CommandWords {
  std::string path;
  std::vector<std::string> words;
};

void collect(const CLI::App& app, const std::string& path, std::vector<CommandWords>& out) {
  CommandWords c{path, {}};
  const auto visible = [](const CLI::App* sub) { return !sub->get_group().empty(); };
  for (const CLI::App* sub : app.get_subcommands(visible)) c.words.push_back(sub->get_name());
  for (const CLI::Option* o : app.get_options()) {
    if (o->get_group().empty()) continue;
    for (const std::string& name : o->get_lnames()) c.words.push_back("--" + name);
    for (const std::string& name : o->get_snames()) c.words.push_back("-" + name);
  }
  out.push_back(c);
  for (const CLI::App* sub : app.get_subcommands(visible)) {
    collect(*sub, path.empty() ? sub->get_name() : path + " " + sub->get_name(), out);
  }
}

std::string joined(const std::vector<std::string>& words) {
  std::string s;
  for (const auto& w : words) s += (s.empty() ? "" : " ") + w;
  return s;
}

// Bash: the words typed so far that are commands make the path; its words are offered, and a
// word after a flag that takes a value completes as a file name.
std::string bash_script(const std::vector<CommandWords>& tree) {
  std::string cases;
  for (const auto& c : tree)
    cases += fmt::format("    \"{}\") words=\"{}\" ;;\n", c.path, joined(c.words));
  return fmt::format(R"(# bash completion for fib (made by `fib completion bash`)
_fib() {{
  local cur=${{COMP_WORDS[COMP_CWORD]}} path="" i w words
  for ((i = 1; i < COMP_CWORD; i++)); do
    w=${{COMP_WORDS[i]}}
    [[ $w == -* ]] && continue
    case "${{path:+$path }}$w" in
{}      *) continue ;;
    esac
    path="${{path:+$path }}$w"
  done
  case "$path" in
{}  esac
  if [[ $cur != -* && ${{COMP_WORDS[COMP_CWORD-1]}} == -* ]]; then
    COMPREPLY=($(compgen -f -- "$cur"))
  else
    COMPREPLY=($(compgen -W "$words" -- "$cur"))
  fi
}}
complete -o filenames -F _fib fib
)",
                     [&] {
                       std::string known;
                       for (const auto& c : tree) {
                         if (!c.path.empty()) known += fmt::format("      \"{}\") ;;\n", c.path);
                       }
                       return known;
                     }(),
                     cases);
}

// Zsh runs the bash script through bashcompinit, which keeps one description of the tree.
std::string zsh_script(const std::vector<CommandWords>& tree) {
  return "# zsh completion for fib (made by `fib completion zsh`)\n"
         "autoload -U +X bashcompinit && bashcompinit\n" +
         bash_script(tree);
}

}  // namespace

void register_completion(CLI::App& app, Runner& run) {
  auto shell = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(
      "completion",
      "Print a shell completion script: eval \"$(fib completion bash)\" (or zsh) in your rc file");
  cmd->add_option("shell", *shell, "bash or zsh")
      ->required()
      ->check(CLI::IsMember({"bash", "zsh"}));
  cmd->callback([&run, &app, shell] {
    run = [&app, shell] {
      std::vector<CommandWords> tree;
      collect(app, "", tree);
      std::cout << (*shell == "zsh" ? zsh_script(tree) : bash_script(tree));
      return kExitOk;
    };
  });
}

}  // namespace fib::cli
