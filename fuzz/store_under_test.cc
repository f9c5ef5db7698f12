#include "fuzz/store_under_test.h"

#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "fuzz/fuzz_report.h"
#include "service/store/postgres/postgres_range_store.h"
#include "service/store/sqlite/sqlite_range_store.h"

namespace hilo::fuzz {
namespace {

const char* PostgresUri() {
  const char* uri = getenv("HILO_FUZZ_POSTGRES_URI");
  return uri != nullptr && *uri != '\0' ? uri : nullptr;
}

// One scratch directory per fuzzing process, removed at exit: under
// $HILO_FUZZ_DIR if set, else in /dev/shm when there is one (no disk
// flushes, many more inputs a second), else under $TMPDIR or /tmp.
const std::string& ScratchDir() {
  static const std::string* const dir = [] {
    std::string base = "/tmp";
    if (const char* tmp = getenv("TMPDIR"); tmp != nullptr && *tmp != '\0') {
      base = tmp;
    }
    if (access("/dev/shm", W_OK) == 0) base = "/dev/shm";
    if (const char* d = getenv("HILO_FUZZ_DIR"); d != nullptr && *d != '\0') {
      base = d;
    }
    std::string pattern = absl::StrCat(base, "/hilo-fuzz-XXXXXX");
    if (mkdtemp(pattern.data()) == nullptr) {
      Fail(absl::StrCat("mkdtemp under ", base, " failed"));
    }
    auto* path = new std::string(pattern);
    atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(ScratchDir(), ec);
    });
    return path;
  }();
  return *dir;
}

// The PostgreSQL stores' counters, summed over every store this process
// closed.
PostgresRangeStore::Counters& Totals() {
  static PostgresRangeStore::Counters totals;
  return totals;
}

}  // namespace

std::string StoreUnderTest::RetryReport() {
  if (PostgresUri() == nullptr) return "";
  const PostgresRangeStore::Counters& t = Totals();
  return absl::StrCat(
      t.set_aside, " operations set aside (a row the other pod held; ",
      t.creations_set_aside, " of them a collection it was creating), ",
      t.locked_failures, " failed after lock_timeout, ", t.conflict_retries,
      " batches run again after a conflict");
}

StoreUnderTest::StoreUnderTest() {
  static uint64_t inputs = 0;
  ++inputs;
  if (PostgresUri() != nullptr) {
    prefix_ = absl::StrCat("fuzz-", getpid(), "-", inputs, "/");
    const char* concurrent = getenv("HILO_FUZZ_POSTGRES_CONCURRENT");
    concurrent_ = concurrent != nullptr && std::string(concurrent) == "1";
    // Reported where it means something: runs with both pods at once.
    static const bool reported = concurrent_ && [] {
      atexit([] {
        std::fprintf(stderr, "range_store_fuzzer: PostgreSQL: %s\n",
                     RetryReport().c_str());
      });
      return true;
    }();
    (void)reported;
  } else {
    path_ = ScratchDir() + "/store.db";
    RemoveFiles(path_);
  }
  Open();
}

StoreUnderTest::~StoreUnderTest() {
  Close();
  if (!path_.empty()) RemoveFiles(path_);
}

std::string StoreUnderTest::Stored(absl::string_view collection) const {
  return absl::StrCat(prefix_, collection);
}

void StoreUnderTest::Close() {
  for (std::unique_ptr<RangeStore>* pod : {&store_, &second_}) {
    if (auto* postgres = dynamic_cast<PostgresRangeStore*>(pod->get())) {
      const PostgresRangeStore::Counters c = postgres->counters();
      PostgresRangeStore::Counters& t = Totals();
      t.set_aside += c.set_aside;
      t.creations_set_aside += c.creations_set_aside;
      t.locked_failures += c.locked_failures;
      t.conflict_retries += c.conflict_retries;
    }
    pod->reset();
  }
}

void StoreUnderTest::Open() {
  if (const char* uri = PostgresUri(); uri != nullptr) {
    for (std::unique_ptr<RangeStore>* pod : {&store_, &second_}) {
      PostgresRangeStoreOptions options;
      options.uri = uri;
      absl::StatusOr<std::unique_ptr<PostgresRangeStore>> store =
          PostgresRangeStore::Open(std::move(options));
      if (!store.ok()) {
        Fail(absl::StrCat("PostgresRangeStore::Open: ",
                          store.status().ToString()));
      }
      *pod = *std::move(store);
    }
    return;
  }
  SqliteRangeStoreOptions options;
  options.path = path_;
  // A process crash loses nothing the kernel was given in either mode, and
  // the fuzzer crashes processes, not machines.
  options.sync = SyncMode::kNormal;
  absl::StatusOr<std::unique_ptr<SqliteRangeStore>> store =
      SqliteRangeStore::Open(std::move(options));
  if (!store.ok()) {
    Fail(absl::StrCat("SqliteRangeStore::Open(", path_,
                      "): ", store.status().ToString()));
  }
  store_ = *std::move(store);
}

void StoreUnderTest::RemoveFiles(const std::string& path) const {
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
    unlink((path + suffix).c_str());
  }
}

void StoreUnderTest::Restart() {
  Close();
  Open();
}

void StoreUnderTest::CrashRestart() {
  if (path_.empty()) {
    Restart();
    return;
  }
  // The files as they are now, while the store still has them open.
  const std::string copy = path_ + ".crashed";
  RemoveFiles(copy);
  std::error_code ec;
  for (const char* suffix : {"", "-wal"}) {
    const std::string from = path_ + suffix;
    if (!std::filesystem::exists(from)) continue;
    std::filesystem::copy_file(from, copy + suffix, ec);
    if (ec) Fail(absl::StrCat("copying ", from, ": ", ec.message()));
  }
  // The store goes with the files it had open; the copies take their place.
  Close();
  RemoveFiles(path_);
  for (const char* suffix : {"", "-wal"}) {
    if (!std::filesystem::exists(copy + suffix)) continue;
    std::filesystem::rename(copy + suffix, path_ + suffix, ec);
    if (ec) Fail(absl::StrCat("renaming ", copy, suffix, ": ", ec.message()));
  }
  Open();
}

}  // namespace hilo::fuzz
