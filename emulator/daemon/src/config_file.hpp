// rnicd --config FILE: a file of `key = value` lines, each the long option of the same name
// (`iface = eth0` is `--iface eth0`, a bare `busy-poll` is `--busy-poll`, `eal = ...` the EAL
// arguments after `--`). The file only produces arguments for parse_options, so every option,
// including ones added later, is a key without any change here (docs/packaging.md).
#pragma once

#include <string>
#include <vector>

#include "options.hpp"
#include "rnic/wire/expected.hpp"

namespace rnic::daemon {

// One option of the file: its arguments ("--key" and, unless a flag, the value) and its line.
struct ConfigLine {
    std::string key;
    std::vector<std::string> args;
    unsigned line = 0;
};

struct ConfigFile {
    std::string path;
    std::vector<ConfigLine> options;  // in file order: per-port keys follow their `iface`
    std::vector<std::string> eal;     // every `eal =` line's words, in order
};

// Reads the file's lines; a syntax error names the file and the line.
wire::Expected<ConfigFile, std::string> read_config_file(const std::string& path);
// The same from text (the unit tests); `path` only names it in errors.
wire::Expected<ConfigFile, std::string> parse_config_text(const std::string& text, const std::string& path);

// rnicd's whole command line: without --config, parse_options(args). With `--config FILE` (or
// `--config=FILE`) the file's options come first and the command line's after them; a key the
// command line gives replaces every line of the file with that key (EAL arguments after `--`
// replace the file's `eal`). An error an option of the file causes names the file and line.
wire::Expected<Options, std::string> parse_command_line(const std::vector<std::string>& args);
// The same with the file already read (the unit tests).
wire::Expected<Options, std::string> parse_with_config(const ConfigFile& file, const std::vector<std::string>& args);

}  // namespace rnic::daemon
