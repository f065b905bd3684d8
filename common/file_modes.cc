// See file_modes.h.
#include "common/file_modes.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

namespace eq {

void restrictNewFiles() { ::umask(kOwnerOnlyUmask); }

Status restrictExistingFile(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status::ok();
    return Status(500, "cannot stat " + path + ": " + std::strerror(errno));
  }
  if ((st.st_mode & kOwnerOnlyUmask) == 0) return Status::ok();
  if (::chmod(path.c_str(), st.st_mode & 07700) != 0) {
    return Status(500, "cannot restrict the mode of " + path + ": " + std::strerror(errno));
  }
  return Status::ok();
}

}  // namespace eq
