// Files: reading a whole one with the one error every command reports for a file it cannot
// read; writing one so that a crash leaves either the old file or the new one, never half
// of it; and checking, before a run starts, that the places it will write to take files.
#pragma once

#include <cstdint>
#include <string>

namespace ppstage {

// The bytes of the file at `path`. Throws ppstage::Error "cannot read <what> '<path>': <why>"
// ("cannot read schedule table 'x.csv': No such file or directory") when it cannot be opened
// or read or is a directory, and when it is larger than `max_bytes` (0: any size).
std::string readFile(const std::string& path, const std::string& what, uint64_t max_bytes = 0);

// Throws ppstage::Error "cannot read <what> '<path>': <why>" when `path` cannot be opened for
// reading ("No such file or directory", "Permission denied", "it is a directory").
void checkReadableFile(const std::string& path, const std::string& what);

// Writes `bytes` to `path` atomically and durably: to `path.tmp-<pid>` first, fsync, rename
// over `path`, then fsync the directory, so that after a crash at any point `path` is
// either absent (or its old content) or complete. Throws ppstage::Error naming `path` and
// the system's reason.
void writeFileAtomically(const std::string& path, const std::string& bytes);

// fsync of a directory, making the renames and removals in it durable. Throws
// ppstage::Error.
void syncDirectory(const std::string& dir);

// Creates directory `dir` (and its parents) when missing, then proves a file can be
// created in it by creating and removing a probe file: permissions alone do not tell (root
// ignores them; a read-only mount does not). Throws ppstage::Error "cannot write --<option>
// '<dir>': <reason>".
void checkWritableDirectory(const std::string& dir, const std::string& option);

// The same for a file the run will write at its end: its directory must exist and take a
// probe file, and `path` must not be a directory.
void checkWritableFile(const std::string& path, const std::string& option);

}  // namespace ppstage
