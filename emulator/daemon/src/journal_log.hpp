// rnicd's log line format: its own timestamps on a terminal or in a file, syslog priority
// prefixes ("<6>rnicd up: ...") when stderr is the systemd journal, which stamps lines itself
// and reads the prefix as the line's priority (`journalctl -p warning` then finds warnings).
#pragma once

namespace rnic::daemon {

// Whether stderr is the journal's stream: systemd sets JOURNAL_STREAM to its device:inode.
bool stderr_is_journal();
// Sets spdlog's pattern for the default logger accordingly.
void set_log_format();

}  // namespace rnic::daemon
