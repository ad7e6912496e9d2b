#include "config_file.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

namespace rnic::daemon {

namespace {

using U = wire::Unexpected<std::string>;

std::string trim(const std::string& s) {
    const auto first = s.find_first_not_of(" \t\r");
    if (first == std::string::npos) return {};
    return s.substr(first, s.find_last_not_of(" \t\r") - first + 1);
}

// "# ..." after whitespace ends a line; a '#' inside a word (none of our values has one) stays.
std::string strip_comment(const std::string& s) {
    for (size_t i = 0; i < s.size(); ++i)
        if (s[i] == '#' && (i == 0 || s[i - 1] == ' ' || s[i - 1] == '\t')) return s.substr(0, i);
    return s;
}

bool valid_key(const std::string& k) {
    if (k.empty() || !(std::islower(static_cast<unsigned char>(k[0])) || std::isdigit(static_cast<unsigned char>(k[0]))))
        return false;
    return std::all_of(k.begin(), k.end(), [](char c) {
        return std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '-';
    });
}

std::vector<std::string> words(const std::string& s) {
    std::istringstream in(s);
    std::vector<std::string> out;
    for (std::string w; in >> w;) out.push_back(w);
    return out;
}

// The keys the command line gives (its "--key" words before "--"), which replace the file's.
std::set<std::string> command_line_keys(const std::vector<std::string>& args, bool& has_eal) {
    std::set<std::string> keys;
    has_eal = false;
    for (const std::string& a : args) {
        if (a == "--") {
            has_eal = true;
            break;
        }
        if (a.size() > 2 && a.compare(0, 2, "--") == 0) keys.insert(a.substr(2));
    }
    return keys;
}

// The file's part of the arguments: its lines up to (not including) `upto`, skipping replaced keys.
std::vector<std::string> file_args(const ConfigFile& f, size_t upto, const std::set<std::string>& replaced) {
    std::vector<std::string> out;
    for (size_t i = 0; i < upto && i < f.options.size(); ++i)
        if (!replaced.count(f.options[i].key)) out.insert(out.end(), f.options[i].args.begin(), f.options[i].args.end());
    return out;
}

}  // namespace

wire::Expected<ConfigFile, std::string> parse_config_text(const std::string& text, const std::string& path) {
    ConfigFile f;
    f.path = path;
    std::istringstream in(text);
    unsigned n = 0;
    for (std::string raw; std::getline(in, raw);) {
        ++n;
        const std::string where = path + ":" + std::to_string(n) + ": ";
        const std::string line = trim(strip_comment(raw));
        if (line.empty() || line[0] == ';') continue;
        const auto eq = line.find('=');
        const std::string key = trim(line.substr(0, eq));
        if (key.size() > 2 && key.compare(0, 2, "--") == 0)
            return U{where + "write the key without its dashes ('" + key.substr(2) + "', not '" + key + "')"};
        if (!valid_key(key)) return U{where + "expected 'key = value' or a bare 'key', got '" + line + "'"};
        if (key == "config") return U{where + "'config' cannot be used inside a configuration file"};
        if (eq == std::string::npos) {
            if (key == "eal") return U{where + "'eal' needs a value (the EAL arguments)"};
            f.options.push_back({key, {"--" + key}, n});
            continue;
        }
        std::string value = trim(line.substr(eq + 1));
        if (value.size() >= 2 && value.front() == '"' && value.back() == '"') value = value.substr(1, value.size() - 2);
        if (value.empty())
            return U{where + "'" + key + " =' has no value (a flag such as busy-poll is written alone)"};
        if (key == "eal") {
            for (std::string& w : words(value)) f.eal.push_back(std::move(w));
            continue;
        }
        f.options.push_back({key, {"--" + key, value}, n});
    }
    return f;
}

wire::Expected<ConfigFile, std::string> read_config_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return U{"cannot read " + path + ": " + std::strerror(errno)};
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad()) return U{"cannot read " + path + ": " + std::strerror(errno)};
    return parse_config_text(text.str(), path);
}

wire::Expected<Options, std::string> parse_with_config(const ConfigFile& file, const std::vector<std::string>& args) {
    bool command_line_eal = false;
    const std::set<std::string> replaced = command_line_keys(args, command_line_eal);
    const auto dashes = std::find(args.begin(), args.end(), std::string("--"));
    const std::vector<std::string> command_options(args.begin(), dashes);
    const std::vector<std::string> eal = command_line_eal ? std::vector<std::string>(dashes + 1, args.end()) : file.eal;

    auto assemble = [&](size_t lines, bool with_command_line) {
        std::vector<std::string> all = file_args(file, lines, replaced);
        if (with_command_line) all.insert(all.end(), command_options.begin(), command_options.end());
        if (!eal.empty()) {
            all.emplace_back("--");
            all.insert(all.end(), eal.begin(), eal.end());
        }
        return all;
    };
    auto parsed = parse_options(assemble(file.options.size(), true));
    if (parsed) return parsed;

    // Which line caused it: the first prefix of the file that fails the same way, when that line's
    // key or value is what the message names (a missing --iface fails every prefix alike: that
    // one is the file's as a whole, not one line's).
    const std::string& error = parsed.error();
    // An option that takes no value given one: parse_options sees the value as an option.
    for (const ConfigLine& l : file.options)
        if (!replaced.count(l.key) && l.args.size() > 1 && error == "unknown option '" + l.args[1] + "'")
            return U{file.path + ":" + std::to_string(l.line) + ": '" + l.key +
                     "' takes no value: write it alone on its line"};
    for (size_t i = 0; i < file.options.size(); ++i) {
        const ConfigLine& l = file.options[i];
        if (replaced.count(l.key)) continue;
        const auto prefix = parse_options(assemble(i + 1, false));
        if (prefix || prefix.error() != error) continue;
        const bool named = error.find("--" + l.key) != std::string::npos ||
                           (l.args.size() > 1 && error.find("'" + l.args[1] + "'") != std::string::npos);
        if (!named) break;
        return U{file.path + ":" + std::to_string(l.line) + ": " + error};
    }
    if (!parse_options(assemble(file.options.size(), false)) && command_options.empty())
        return U{file.path + ": " + error};
    return U{error + " (options from " + file.path + " and the command line)"};
}

wire::Expected<Options, std::string> parse_command_line(const std::vector<std::string>& args) {
    std::vector<std::string> rest;
    std::string config;
    for (size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (a == "--") {
            rest.insert(rest.end(), args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
            break;
        }
        std::string path;
        if (a == "--config") {
            if (i + 1 >= args.size()) return U{"--config needs a file"};
            path = args[++i];
        } else if (a.compare(0, 9, "--config=") == 0) {
            path = a.substr(9);
        } else {
            rest.push_back(a);
            continue;
        }
        if (path.empty()) return U{"--config needs a file"};
        if (!config.empty()) return U{"--config given twice"};
        config = path;
    }
    if (config.empty()) return parse_options(rest);
    // --help needs no file (and must work when the file is the problem).
    const auto options_end = std::find(rest.begin(), rest.end(), std::string("--"));
    if (std::find(rest.begin(), options_end, std::string("--help")) != options_end ||
        std::find(rest.begin(), options_end, std::string("-h")) != options_end)
        return parse_options({"--help"});
    auto file = read_config_file(config);
    if (!file) return U{file.error()};
    return parse_with_config(*file, rest);
}

}  // namespace rnic::daemon
