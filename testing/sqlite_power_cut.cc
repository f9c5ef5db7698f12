#include "testing/sqlite_power_cut.h"

#include <sqlite3.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>

#include "absl/base/thread_annotations.h"
#include "hilo/base/mutex.h"

namespace hilo::testing_util {
namespace {

// The whole file at `path` as it is now; "" if it cannot be read (absent).
std::string ReadWhole(const char* path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  if (in) bytes << in.rdbuf();
  return bytes.str();
}

// The wrapping VFS: sqlite3_vfs::pAppData points here.
class PowerCutVfs {
 public:
  PowerCutVfs();
  ~PowerCutVfs();

  // After the real xOpen of `path` succeeded: its content then is durable
  // until its first sync, if the VFS does not know the path already.
  void Opened(const char* path) {
    base::MutexLock lock(&mu_);
    ++open_files_;
    if (path != nullptr && !durable_.contains(path)) {
      durable_[path] = ReadWhole(path);
    }
  }
  void Closed() {
    base::MutexLock lock(&mu_);
    --open_files_;
  }
  // After the real xSync of `path` returned OK. Read under the lock, so
  // that two syncs of one file store in the order they read.
  void Synced(const char* path) {
    base::MutexLock lock(&mu_);
    durable_[path] = ReadWhole(path);
    ++syncs_[path];
  }
  // Whether a sync of `path` is to fail, as a failing disk's would.
  bool SyncFails(const char* path) const {
    base::MutexLock lock(&mu_);
    return failing_.has_value() && path != nullptr &&
           std::string_view(path).ends_with(*failing_);
  }
  void FailSyncs(std::optional<std::string> suffix) {
    base::MutexLock lock(&mu_);
    failing_ = std::move(suffix);
  }
  void SetPowersafeOverwrite(bool on) {
    base::MutexLock lock(&mu_);
    powersafe_overwrite_ = on;
  }
  bool powersafe_overwrite() const {
    base::MutexLock lock(&mu_);
    return powersafe_overwrite_;
  }
  void Deleted(const char* path) {
    base::MutexLock lock(&mu_);
    durable_.erase(path);
  }

  int syncs(std::string_view suffix) const {
    base::MutexLock lock(&mu_);
    int total = 0;
    for (const auto& [path, count] : syncs_) {
      if (path.ends_with(suffix)) total += count;
    }
    return total;
  }
  std::map<std::string, std::string> durable() const {
    base::MutexLock lock(&mu_);
    return durable_;
  }

  sqlite3_vfs* real() const { return real_; }

 private:
  sqlite3_vfs vfs_ = {};
  sqlite3_vfs* real_ = nullptr;
  mutable base::Mutex mu_;
  std::map<std::string, std::string> durable_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> syncs_ ABSL_GUARDED_BY(mu_);
  int open_files_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<std::string> failing_ ABSL_GUARDED_BY(mu_);
  bool powersafe_overwrite_ ABSL_GUARDED_BY(mu_) = true;
};

// An open file of the wrapper: this header, then the real VFS's file.
struct File {
  sqlite3_file base;  // pMethods: one of kMethods, or null
  PowerCutVfs* vfs;
  const char* path;  // null if not tracked; SQLite keeps it until xClose
};
static_assert(sizeof(File) % 8 == 0,
              "the real file after the header must be aligned");

sqlite3_file* Real(sqlite3_file* file) {
  return reinterpret_cast<sqlite3_file*>(reinterpret_cast<char*>(file) +
                                         sizeof(File));
}
File* Wrapper(sqlite3_file* file) { return reinterpret_cast<File*>(file); }
PowerCutVfs* Vfs(sqlite3_vfs* vfs) {
  return static_cast<PowerCutVfs*>(vfs->pAppData);
}
sqlite3_vfs* RealVfs(sqlite3_vfs* vfs) { return Vfs(vfs)->real(); }

// sqlite3_io_methods, each forwarded to the real file.
int Close(sqlite3_file* file) {
  sqlite3_file* real = Real(file);
  const int rc = real->pMethods->xClose(real);
  Wrapper(file)->vfs->Closed();
  file->pMethods = nullptr;
  return rc;
}
int Read(sqlite3_file* file, void* buffer, int amount, sqlite3_int64 offset) {
  sqlite3_file* real = Real(file);
  return real->pMethods->xRead(real, buffer, amount, offset);
}
int Write(sqlite3_file* file, const void* buffer, int amount,
          sqlite3_int64 offset) {
  sqlite3_file* real = Real(file);
  return real->pMethods->xWrite(real, buffer, amount, offset);
}
int Truncate(sqlite3_file* file, sqlite3_int64 size) {
  sqlite3_file* real = Real(file);
  return real->pMethods->xTruncate(real, size);
}
int Sync(sqlite3_file* file, int flags) {
  sqlite3_file* real = Real(file);
  const File* wrapper = Wrapper(file);
  if (wrapper->vfs->SyncFails(wrapper->path)) return SQLITE_IOERR_FSYNC;
  const int rc = real->pMethods->xSync(real, flags);
  if (rc == SQLITE_OK && wrapper->path != nullptr) {
    wrapper->vfs->Synced(wrapper->path);
  }
  return rc;
}
int FileSize(sqlite3_file* file, sqlite3_int64* size) {
  sqlite3_file* real = Real(file);
  return real->pMethods->xFileSize(real, size);
}
int Lock(sqlite3_file* file, int level) {
  sqlite3_file* real = Real(file);
  return real->pMethods->xLock(real, level);
}
int Unlock(sqlite3_file* file, int level) {
  sqlite3_file* real = Real(file);
  return real->pMethods->xUnlock(real, level);
}
int CheckReservedLock(sqlite3_file* file, int* reserved) {
  sqlite3_file* real = Real(file);
  return real->pMethods->xCheckReservedLock(real, reserved);
}
int FileControl(sqlite3_file* file, int op, void* arg) {
  sqlite3_file* real = Real(file);
  return real->pMethods->xFileControl(real, op, arg);
}
int SectorSize(sqlite3_file* file) {
  sqlite3_file* real = Real(file);
  return real->pMethods->xSectorSize(real);
}
int DeviceCharacteristics(sqlite3_file* file) {
  sqlite3_file* real = Real(file);
  const int characteristics = real->pMethods->xDeviceCharacteristics(real);
  return Wrapper(file)->vfs->powersafe_overwrite()
             ? characteristics
             : characteristics & ~SQLITE_IOCAP_POWERSAFE_OVERWRITE;
}
int ShmMap(sqlite3_file* file, int region, int size, int extend,
           void volatile** memory) {
  sqlite3_file* real = Real(file);
  return real->pMethods->xShmMap(real, region, size, extend, memory);
}
int ShmLock(sqlite3_file* file, int offset, int n, int flags) {
  sqlite3_file* real = Real(file);
  return real->pMethods->xShmLock(real, offset, n, flags);
}
void ShmBarrier(sqlite3_file* file) {
  sqlite3_file* real = Real(file);
  real->pMethods->xShmBarrier(real);
}
int ShmUnmap(sqlite3_file* file, int delete_flag) {
  sqlite3_file* real = Real(file);
  return real->pMethods->xShmUnmap(real, delete_flag);
}
int Fetch(sqlite3_file* file, sqlite3_int64 offset, int amount, void** page) {
  sqlite3_file* real = Real(file);
  return real->pMethods->xFetch(real, offset, amount, page);
}
int Unfetch(sqlite3_file* file, sqlite3_int64 offset, void* page) {
  sqlite3_file* real = Real(file);
  return real->pMethods->xUnfetch(real, offset, page);
}

// One table per sqlite3_io_methods version: the wrapper's iVersion is the
// real file's, and a version's table has only that version's methods.
constexpr sqlite3_io_methods kMethods[] = {
    {1, Close, Read, Write, Truncate, Sync, FileSize, Lock, Unlock,
     CheckReservedLock, FileControl, SectorSize, DeviceCharacteristics, nullptr,
     nullptr, nullptr, nullptr, nullptr, nullptr},
    {2, Close, Read, Write, Truncate, Sync, FileSize, Lock, Unlock,
     CheckReservedLock, FileControl, SectorSize, DeviceCharacteristics, ShmMap,
     ShmLock, ShmBarrier, ShmUnmap, nullptr, nullptr},
    {3, Close, Read, Write, Truncate, Sync, FileSize, Lock, Unlock,
     CheckReservedLock, FileControl, SectorSize, DeviceCharacteristics, ShmMap,
     ShmLock, ShmBarrier, ShmUnmap, Fetch, Unfetch},
};

// sqlite3_vfs methods: xOpen and xDelete keep the books, the rest forward.
int Open(sqlite3_vfs* vfs, sqlite3_filename name, sqlite3_file* file, int flags,
         int* out_flags) {
  File* wrapper = Wrapper(file);
  wrapper->base.pMethods = nullptr;
  wrapper->vfs = Vfs(vfs);
  wrapper->path = nullptr;
  sqlite3_file* real = Real(file);
  real->pMethods = nullptr;
  const int rc =
      RealVfs(vfs)->xOpen(RealVfs(vfs), name, real, flags, out_flags);
  if (real->pMethods == nullptr) return rc;
  if (rc != SQLITE_OK) {
    // SQLite would close it, but sees our null pMethods: close it here.
    real->pMethods->xClose(real);
    return rc;
  }
  const int version = std::clamp(real->pMethods->iVersion, 1, 3);
  wrapper->base.pMethods = &kMethods[version - 1];
  if (name != nullptr && (flags & SQLITE_OPEN_DELETEONCLOSE) == 0) {
    wrapper->path = name;
  }
  wrapper->vfs->Opened(wrapper->path);
  return rc;
}
int Delete(sqlite3_vfs* vfs, const char* name, int sync_dir) {
  const int rc = RealVfs(vfs)->xDelete(RealVfs(vfs), name, sync_dir);
  if (rc == SQLITE_OK || rc == SQLITE_IOERR_DELETE_NOENT) {
    Vfs(vfs)->Deleted(name);
  }
  return rc;
}
int Access(sqlite3_vfs* vfs, const char* name, int flags, int* result) {
  return RealVfs(vfs)->xAccess(RealVfs(vfs), name, flags, result);
}
int FullPathname(sqlite3_vfs* vfs, const char* name, int size, char* out) {
  return RealVfs(vfs)->xFullPathname(RealVfs(vfs), name, size, out);
}
void* DlOpen(sqlite3_vfs* vfs, const char* name) {
  return RealVfs(vfs)->xDlOpen(RealVfs(vfs), name);
}
void DlError(sqlite3_vfs* vfs, int size, char* message) {
  RealVfs(vfs)->xDlError(RealVfs(vfs), size, message);
}
using Symbol = void (*)(void);
Symbol DlSym(sqlite3_vfs* vfs, void* handle, const char* symbol) {
  return RealVfs(vfs)->xDlSym(RealVfs(vfs), handle, symbol);
}
void DlClose(sqlite3_vfs* vfs, void* handle) {
  RealVfs(vfs)->xDlClose(RealVfs(vfs), handle);
}
int Randomness(sqlite3_vfs* vfs, int size, char* out) {
  return RealVfs(vfs)->xRandomness(RealVfs(vfs), size, out);
}
int Sleep(sqlite3_vfs* vfs, int microseconds) {
  return RealVfs(vfs)->xSleep(RealVfs(vfs), microseconds);
}
int CurrentTime(sqlite3_vfs* vfs, double* now) {
  return RealVfs(vfs)->xCurrentTime(RealVfs(vfs), now);
}
int GetLastError(sqlite3_vfs* vfs, int size, char* message) {
  return RealVfs(vfs)->xGetLastError(RealVfs(vfs), size, message);
}
int CurrentTimeInt64(sqlite3_vfs* vfs, sqlite3_int64* now) {
  return RealVfs(vfs)->xCurrentTimeInt64(RealVfs(vfs), now);
}
int SetSystemCall(sqlite3_vfs* vfs, const char* name,
                  sqlite3_syscall_ptr call) {
  return RealVfs(vfs)->xSetSystemCall(RealVfs(vfs), name, call);
}
sqlite3_syscall_ptr GetSystemCall(sqlite3_vfs* vfs, const char* name) {
  return RealVfs(vfs)->xGetSystemCall(RealVfs(vfs), name);
}
const char* NextSystemCall(sqlite3_vfs* vfs, const char* name) {
  return RealVfs(vfs)->xNextSystemCall(RealVfs(vfs), name);
}

PowerCutVfs::PowerCutVfs() {
  if (sqlite3_initialize() != SQLITE_OK ||
      (real_ = sqlite3_vfs_find(nullptr)) == nullptr) {
    std::fprintf(stderr, "SqlitePowerCut: no default SQLite VFS to wrap\n");
    std::abort();
  }
  vfs_.iVersion = std::min(real_->iVersion, 3);
  vfs_.szOsFile = static_cast<int>(sizeof(File)) + real_->szOsFile;
  vfs_.mxPathname = real_->mxPathname;
  vfs_.zName = "hilo-sqlite-power-cut";
  vfs_.pAppData = this;
  vfs_.xOpen = Open;
  vfs_.xDelete = Delete;
  vfs_.xAccess = Access;
  vfs_.xFullPathname = FullPathname;
  vfs_.xDlOpen = DlOpen;
  vfs_.xDlError = DlError;
  vfs_.xDlSym = DlSym;
  vfs_.xDlClose = DlClose;
  vfs_.xRandomness = Randomness;
  vfs_.xSleep = Sleep;
  vfs_.xCurrentTime = CurrentTime;
  vfs_.xGetLastError = GetLastError;
  if (vfs_.iVersion >= 2) {
    vfs_.xCurrentTimeInt64 =
        real_->xCurrentTimeInt64 != nullptr ? CurrentTimeInt64 : nullptr;
  }
  if (vfs_.iVersion >= 3) {
    vfs_.xSetSystemCall =
        real_->xSetSystemCall != nullptr ? SetSystemCall : nullptr;
    vfs_.xGetSystemCall =
        real_->xGetSystemCall != nullptr ? GetSystemCall : nullptr;
    vfs_.xNextSystemCall =
        real_->xNextSystemCall != nullptr ? NextSystemCall : nullptr;
  }
  if (const int rc = sqlite3_vfs_register(&vfs_, /*makeDflt=*/1);
      rc != SQLITE_OK) {
    std::fprintf(stderr, "SqlitePowerCut: sqlite3_vfs_register: %s\n",
                 sqlite3_errstr(rc));
    std::abort();
  }
}

PowerCutVfs::~PowerCutVfs() {
  {
    base::MutexLock lock(&mu_);
    if (open_files_ != 0) {
      std::fprintf(stderr,
                   "SqlitePowerCut: destroyed with %d files still open "
                   "through it: close the connections first\n",
                   open_files_);
      std::abort();
    }
  }
  sqlite3_vfs_unregister(&vfs_);
}

}  // namespace

struct SqlitePowerCut::State {
  PowerCutVfs vfs;
};

SqlitePowerCut::SqlitePowerCut() : state_(std::make_unique<State>()) {}

SqlitePowerCut::~SqlitePowerCut() = default;

int SqlitePowerCut::syncs(std::string_view suffix) const {
  return state_->vfs.syncs(suffix);
}

void SqlitePowerCut::FailSyncs(std::string_view suffix) {
  state_->vfs.FailSyncs(std::string(suffix));
}

void SqlitePowerCut::HealSyncs() { state_->vfs.FailSyncs(std::nullopt); }

void SqlitePowerCut::ClearPowersafeOverwrite() {
  state_->vfs.SetPowersafeOverwrite(false);
}

SqlitePowerCut::Disk SqlitePowerCut::Durable() const {
  return Disk{state_->vfs.durable()};
}

void SqlitePowerCut::Restore(const Disk& disk) {
  for (const auto& [path, bytes] : disk.files) {
    std::error_code error;
    if (bytes.empty()) {
      if (std::filesystem::exists(path, error)) {
        std::filesystem::resize_file(path, 0, error);
      }
    } else {
      std::ofstream out(path, std::ios::binary | std::ios::trunc);
      out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
      out.close();
      if (!out) error = std::make_error_code(std::errc::io_error);
    }
    if (error) {
      std::fprintf(stderr, "SqlitePowerCut::Restore: %s: %s\n", path.c_str(),
                   error.message().c_str());
      std::abort();
    }
    std::filesystem::remove(path + "-shm", error);
  }
}

}  // namespace hilo::testing_util
