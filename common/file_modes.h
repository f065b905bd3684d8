// Who may read the files the processes write (issue 27, item 4).
//
// The database holds webhook signing secrets in clear (a signature needs the
// secret itself), password and key hashes and every message text; the logs
// and broker.env carry task ids and the broker's password. None of it is for
// other users of the machine, so every process (eq-api, eq-worker,
// eq-dispatcher, eqctl, eq-mcp) starts with a umask that keeps what it
// creates to its owner, and the store tightens a database that an older
// version left readable (docs/operations.md, "Files and their modes").
// Process-wide, no state of its own: call once at the start of main().
#pragma once

#include <string>

#include "common/status.h"

namespace eq {

// umask 077: files the process creates are 0600, folders 0700, whatever the
// umask of the shell or service manager that started it.
inline constexpr unsigned kOwnerOnlyUmask = 077;

// Sets kOwnerOnlyUmask. Call first in main(), before any file is opened.
void restrictNewFiles();

// Takes group and other permissions off `path` if it exists and has any,
// keeping the owner's; a missing file is not an error. Used for files an
// older version (or another umask) created before restrictNewFiles() was in
// place.
Status restrictExistingFile(const std::string& path);

}  // namespace eq
