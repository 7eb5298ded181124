#include "usage.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "../base/util.h"
#include "tarnn/io.h"

namespace tarnn::cli {

std::string flag_of(const Message::Field &field) {
  // the fields whose flags are not their names
  static const std::map<std::string, std::string> flags = {{"n", "-n"},
                                                           {"client_seconds", "--client-timeout"}};
  const auto it = flags.find(field.name);
  std::string flag = "--" + field.name;
  if (it != flags.end())
    flag = it->second;
  else
    std::replace(flag.begin(), flag.end(), '_', '-');
  return field.value.empty() ? flag : flag + " " + field.value;
}

namespace {

std::string without_dashes(const std::string &s) { return s.substr(s.find_first_not_of('-')); }

const CLI::App *subcommand_named(const CLI::App &app, const std::string &name) {
  for (const CLI::App *c : app.get_subcommands([](const CLI::App *) { return true; }))
    if (c->get_name() == name)
      return c;
  return nullptr;
}

std::string suggestion(const std::string &typed, const std::vector<std::string> &known) {
  const std::string near = closest(typed, known);
  return near.empty() ? "" : " (did you mean " + near + "?)";
}

// The first flag of `argv[from..]` that `cmd` does not know, with a suggestion, or "".
std::string unknown_flag(const CLI::App &cmd, int from, int argc, char **argv) {
  std::vector<std::string> names, shown; // every spelling; those the help shows
  for (const CLI::Option *o : cmd.get_options()) {
    std::vector<std::string> mine;
    for (const std::string &l : o->get_lnames())
      mine.push_back("--" + l);
    for (const std::string &s : o->get_snames())
      mine.push_back("-" + s);
    names.insert(names.end(), mine.begin(), mine.end());
    if (!o->get_group().empty())
      shown.insert(shown.end(), mine.begin(), mine.end());
  }
  for (int i = from; i < argc; ++i) {
    const std::string t = argv[i];
    if (t == "--")
      break;
    const bool flag = t.size() >= 2 && t[0] == '-' &&
                      (t[1] == '-' || std::isalpha(static_cast<unsigned char>(t[1])));
    if (!flag)
      continue; // a value, a negative number among them
    // --name=value, and a short flag's value glued to it (-n5)
    const std::string name = t[1] == '-' ? t.substr(0, t.find('=')) : t.substr(0, 2);
    if (std::find(names.begin(), names.end(), name) == names.end())
      return "unknown flag " + name + suggestion(name, shown);
  }
  return "";
}

} // namespace

void require_extension(const std::string &flag, const std::string &path, const std::string &ext,
                       const std::string &hint) {
  if (!has_extension(path, ext))
    throw UsageError(flag + " " + path + ": must end in " + ext + " (any case)" + hint);
}

std::string closest(const std::string &typed, const std::vector<std::string> &known) {
  const std::string core = without_dashes(typed);
  std::string best;
  size_t best_d = SIZE_MAX;
  for (const std::string &k : known) {
    const size_t d = edit_distance(core, without_dashes(k));
    if (d < best_d)
      best = k, best_d = d;
  }
  // near: a slip of a finger or two, and less than the whole of what was typed
  return best_d <= 2 + core.size() / 8 && best_d < core.size() ? best : "";
}

std::string explain_parse_error(const CLI::App &app, int argc, char **argv,
                                const std::string &what) {
  if (argc < 2 || argv[1][0] == '-')
    return what;
  const CLI::App *cmd = subcommand_named(app, argv[1]);
  if (!cmd) {
    std::vector<std::string> names;
    for (const CLI::App *c : app.get_subcommands([](const CLI::App *) { return true; }))
      names.push_back(c->get_name());
    std::string all;
    for (const std::string &n : names)
      all += (all.empty() ? "" : ", ") + n;
    const std::string near = closest(argv[1], names);
    return "unknown command '" + std::string(argv[1]) + "' (" +
           (near.empty() ? "commands: " + all : "did you mean " + near + "?") + ")";
  }
  const std::string flag = unknown_flag(*cmd, 2, argc, argv);
  return flag.empty() ? what : flag;
}

int report_usage_error(const std::string &message, const CLI::App &app, int argc, char **argv) {
  const bool named = argc >= 2 && subcommand_named(app, argv[1]);
  std::fprintf(stderr, "tarnn: usage error: %s (see tarnn %s--help)\n", message.c_str(),
               named ? (std::string(argv[1]) + " ").c_str() : "");
  return 2;
}

} // namespace tarnn::cli
