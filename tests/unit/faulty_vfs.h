// FaultyVfs: a SQLite VFS over the default one ("unix") whose writes fail
// on demand, with SQLITE_FULL (what the unix VFS returns on ENOSPC) or an
// SQLITE_IOERR_* code, for the files of chosen kinds (the database, its WAL,
// a rollback journal). It lets a unit test put a Store through a full disk
// or a failing device without either, and take it back.
//
// Test-only. While an instance lives it is SQLite's default VFS, so every
// connection opened meanwhile goes through it (a Store, a raw sqlite3 handle
// of the test); the destructor restores the previous default. One at a
// time: the fault settings are process-wide (atomics: a DbThread's thread
// writes while the test thread switches the fault).
#pragma once

#include <sqlite3.h>

#include <atomic>
#include <boost/test/unit_test.hpp>

namespace eq::test {

class FaultyVfs {
 public:
  // File kinds for failWrites(), as SQLite's open flags name them.
  static constexpr int kMainDb = SQLITE_OPEN_MAIN_DB;
  static constexpr int kWal = SQLITE_OPEN_WAL;
  static constexpr int kJournal = SQLITE_OPEN_MAIN_JOURNAL;

  FaultyVfs() {
    real_ = sqlite3_vfs_find(nullptr);
    BOOST_REQUIRE(real_ != nullptr);
    vfs_ = *real_;  // every method but xOpen is the real one's
    vfs_.pNext = nullptr;
    vfs_.zName = "eq-faulty";
    vfs_.szOsFile = static_cast<int>(sizeof(File)) + real_->szOsFile;
    vfs_.xOpen = &FaultyVfs::open;
    self() = this;
    BOOST_REQUIRE(sqlite3_vfs_register(&vfs_, 1) == SQLITE_OK);
  }
  ~FaultyVfs() {
    sqlite3_vfs_unregister(&vfs_);
    sqlite3_vfs_register(real_, 1);
    self() = nullptr;
  }
  FaultyVfs(const FaultyVfs&) = delete;
  FaultyVfs& operator=(const FaultyVfs&) = delete;

  // From now on every write to a file of `kinds` (a mask of kMainDb, kWal,
  // kJournal) returns `rc`; rc 0 ends the fault.
  void failWrites(int rc, int kinds) {
    kinds_.store(kinds);
    rc_.store(rc);
  }
  void heal() { failWrites(0, 0); }
  // Writes refused so far.
  int refused() const { return refused_.load(); }

 private:
  // SQLite allocates szOsFile bytes per open file: ours, then the real one's.
  struct File {
    sqlite3_file base;
    sqlite3_file* real;
    int kind;
  };

  static FaultyVfs*& self() {
    static FaultyVfs* instance = nullptr;
    return instance;
  }
  static sqlite3_file* real(sqlite3_file* f) { return reinterpret_cast<File*>(f)->real; }

  static int open(sqlite3_vfs*, const char* name, sqlite3_file* f, int flags, int* out_flags) {
    File* file = reinterpret_cast<File*>(f);
    file->real = reinterpret_cast<sqlite3_file*>(file + 1);
    file->kind = flags & (kMainDb | kWal | kJournal);
    sqlite3_vfs* real_vfs = self()->real_;
    int rc = real_vfs->xOpen(real_vfs, name, file->real, flags, out_flags);
    // SQLite calls xClose only when pMethods is set: set it only if the
    // real file is open.
    f->pMethods = file->real->pMethods != nullptr ? &kMethods : nullptr;
    return rc;
  }

  static int write(sqlite3_file* f, const void* data, int n, sqlite3_int64 offset) {
    FaultyVfs* v = self();
    int rc = v->rc_.load();
    if (rc != 0 && (reinterpret_cast<File*>(f)->kind & v->kinds_.load()) != 0) {
      v->refused_.fetch_add(1);
      return rc;
    }
    return real(f)->pMethods->xWrite(real(f), data, n, offset);
  }

  // Everything else goes to the real file as it is.
  static int close(sqlite3_file* f) { return real(f)->pMethods->xClose(real(f)); }
  static int read(sqlite3_file* f, void* d, int n, sqlite3_int64 o) {
    return real(f)->pMethods->xRead(real(f), d, n, o);
  }
  static int truncate(sqlite3_file* f, sqlite3_int64 size) {
    return real(f)->pMethods->xTruncate(real(f), size);
  }
  static int sync(sqlite3_file* f, int flags) { return real(f)->pMethods->xSync(real(f), flags); }
  static int fileSize(sqlite3_file* f, sqlite3_int64* size) {
    return real(f)->pMethods->xFileSize(real(f), size);
  }
  static int lock(sqlite3_file* f, int l) { return real(f)->pMethods->xLock(real(f), l); }
  static int unlock(sqlite3_file* f, int l) { return real(f)->pMethods->xUnlock(real(f), l); }
  static int checkReserved(sqlite3_file* f, int* out) {
    return real(f)->pMethods->xCheckReservedLock(real(f), out);
  }
  static int fileControl(sqlite3_file* f, int op, void* arg) {
    return real(f)->pMethods->xFileControl(real(f), op, arg);
  }
  static int sectorSize(sqlite3_file* f) { return real(f)->pMethods->xSectorSize(real(f)); }
  static int deviceCharacteristics(sqlite3_file* f) {
    return real(f)->pMethods->xDeviceCharacteristics(real(f));
  }
  static int shmMap(sqlite3_file* f, int page, int size, int extend, void volatile** out) {
    return real(f)->pMethods->xShmMap(real(f), page, size, extend, out);
  }
  static int shmLock(sqlite3_file* f, int offset, int n, int flags) {
    return real(f)->pMethods->xShmLock(real(f), offset, n, flags);
  }
  static void shmBarrier(sqlite3_file* f) { real(f)->pMethods->xShmBarrier(real(f)); }
  static int shmUnmap(sqlite3_file* f, int del) {
    return real(f)->pMethods->xShmUnmap(real(f), del);
  }
  static int fetch(sqlite3_file* f, sqlite3_int64 o, int n, void** out) {
    return real(f)->pMethods->xFetch(real(f), o, n, out);
  }
  static int unfetch(sqlite3_file* f, sqlite3_int64 o, void* p) {
    return real(f)->pMethods->xUnfetch(real(f), o, p);
  }

  // Version 3, like the unix VFS's: WAL needs the shm methods.
  static constexpr sqlite3_io_methods kMethods = {3,
                                                  &close,
                                                  &read,
                                                  &write,
                                                  &truncate,
                                                  &sync,
                                                  &fileSize,
                                                  &lock,
                                                  &unlock,
                                                  &checkReserved,
                                                  &fileControl,
                                                  &sectorSize,
                                                  &deviceCharacteristics,
                                                  &shmMap,
                                                  &shmLock,
                                                  &shmBarrier,
                                                  &shmUnmap,
                                                  &fetch,
                                                  &unfetch};

  sqlite3_vfs* real_ = nullptr;
  sqlite3_vfs vfs_{};
  std::atomic<int> rc_{0};
  std::atomic<int> kinds_{0};
  std::atomic<int> refused_{0};
};

}  // namespace eq::test
