// SqlitePowerCut: a machine that loses power, for SQLite under GoogleTest.
// While one exists, SQLite's default VFS remembers what each file held at its
// last fsync, so a test can put the files back to exactly what a power cut
// would leave: what was synced, nothing written after it. For the suites
// only (a test double: it reads a file whole on every sync).
//
//   SqlitePowerCut power;
//   sqlite3* db;  // opened with a null VFS name: through `power`
//   sqlite3_open(path.c_str(), &db);
//   ... transactions ...
//   SqlitePowerCut::Disk disk = power.Durable();  // the cut, connections open
//   sqlite3_close(db);                          // a clean close syncs all
//   SqlitePowerCut::Restore(disk);              // what the cut left
//   ... reopen and check what survived ...
#ifndef HILO_TESTING_SQLITE_POWER_CUT_H_
#define HILO_TESTING_SQLITE_POWER_CUT_H_

#include <map>
#include <memory>
#include <string>
#include <string_view>

namespace hilo::testing_util {

// While it exists, SQLite's default VFS is a wrapper of the one that was
// default before (unix), registered with sqlite3_vfs_register(vfs,
// /*makeDflt=*/1) in the constructor and unregistered in the destructor (the
// old default becomes default again). Every connection opened meanwhile with
// a null VFS name goes through it. For each file opened through it by name
// (main database, -wal, journal; not temporary files, nor the -shm, which the
// unix VFS maps itself and is memory, not disk) it keeps the file's whole
// content as of its last xSync, read from the real file right after the real
// xSync returned OK. Thread-safe. Destroy it only once every connection
// opened through it is closed (it aborts otherwise).
//
// A file deleted through the VFS (xDelete: a rollback journal at commit, the
// -wal at the last clean close) counts as gone for good, as if its directory
// had been synced: it leaves what Durable() returns until it is opened again.
// The content is read after the sync, not copied as the sync ran: a write of
// another connection to the same file between the two would count as synced.
class SqlitePowerCut {
 public:
  SqlitePowerCut();
  ~SqlitePowerCut();
  SqlitePowerCut(const SqlitePowerCut&) = delete;
  SqlitePowerCut& operator=(const SqlitePowerCut&) = delete;

  // xSync calls that returned OK on files whose path ends with `suffix`
  // ("-wal": the log; "" all files), since construction.
  int syncs(std::string_view suffix = "") const;

  // From now on every xSync of a file whose path ends with `suffix` fails
  // with SQLITE_IOERR_FSYNC and syncs nothing, as a failing disk's would;
  // until HealSyncs.
  void FailSyncs(std::string_view suffix);
  void HealSyncs();

  // From now on files opened through the VFS do not report
  // SQLITE_IOCAP_POWERSAFE_OVERWRITE, as under an SQLite built or opened
  // with psow=0. Call before opening them.
  void ClearPowersafeOverwrite();

  // What a power cut now would leave of every file opened through the VFS so
  // far and not deleted through it since (full path as SQLite passes it to
  // xOpen -> bytes): its content at its last sync; before its first sync, what
  // it held when it was first opened through the VFS (a database made before
  // this object existed keeps its content; a file created through the VFS is
  // ""). Take it while the connections are still open (a clean close syncs
  // everything), then close them, then Restore it.
  struct Disk {
    std::map<std::string, std::string> files;
  };
  Disk Durable() const;

  // Puts the files back as `disk` has them: rewrites each file with content,
  // truncates to 0 bytes each one whose content is "" (leaving it absent if
  // it is), and removes each file's "-shm" sibling. Call with no connection
  // open on them. Aborts, saying why, if a file cannot be written.
  static void Restore(const Disk& disk);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace hilo::testing_util

#endif  // HILO_TESTING_SQLITE_POWER_CUT_H_
