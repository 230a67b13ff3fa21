#include "storage/journal.hpp"

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>
#include <spdlog/spdlog.h>

#include <condition_variable>
#include <cstdarg>
#include <algorithm>
#include <cstdio>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>

namespace warren::storage {
namespace {

void put_be64(std::string& out, std::uint64_t v) {
  for (int shift = 56; shift >= 0; shift -= 8) out.push_back(static_cast<char>((v >> shift) & 0xff));
}

std::uint64_t get_be64(const char* p) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

constexpr const char* journal_cf_name = "journal";
constexpr const char* snapshot_cf_name = "snapshots";

std::string snapshot_key(std::uint64_t stream) {
  std::string key;
  put_be64(key, stream);
  return key;
}

struct pending {
  journal_batch batch;
  append_callback done;
};

// RocksDB's own log goes to ours (warnings and errors only) instead of LOG files in the
// journal directory: no second log format, and nothing written to a disk that may be full
// (RocksDB 7.8 with assertions aborts when its LOG file fails after an earlier error).
class spdlog_logger final : public rocksdb::Logger {
 public:
  spdlog_logger() : rocksdb::Logger(rocksdb::InfoLogLevel::WARN_LEVEL) {}
  using rocksdb::Logger::Logv;
  void Logv(const rocksdb::InfoLogLevel level, const char* format, va_list ap) override {
    if (level < GetInfoLogLevel()) return;
    char buf[1024];
    int n = std::vsnprintf(buf, sizeof buf, format, ap);
    for (int i = std::min<int>(n, sizeof buf - 1) - 1; i >= 0 && (buf[i] == '\n' || buf[i] == '\r'); --i) buf[i] = '\0';
    if (level >= rocksdb::InfoLogLevel::ERROR_LEVEL) spdlog::error("event=rocksdb message=\"{}\"", buf);
    else spdlog::warn("event=rocksdb message=\"{}\"", buf);
  }
  void Logv(const char* format, va_list ap) override { Logv(rocksdb::InfoLogLevel::INFO_LEVEL, format, ap); }
};

}  // namespace

std::string journal_key(std::uint64_t stream, std::uint64_t seq) {
  std::string key;
  key.reserve(16);
  put_be64(key, stream);
  put_be64(key, seq);
  return key;
}

struct journal::impl {
  journal_options options;
  std::unique_ptr<rocksdb::DB> db;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;  // Owned; destroyed before db.
  rocksdb::ColumnFamilyHandle* cf = nullptr;          // Borrowed from handles.
  rocksdb::ColumnFamilyHandle* snapshot_cf = nullptr; // Borrowed from handles.

  std::mutex mutex;
  std::condition_variable wake;
  std::deque<pending> queue;  // Guarded by mutex.
  bool stopping = false;      // Guarded by mutex.
  stats counters;             // Guarded by mutex.
  std::thread writer;

  // Writer thread only: the last seq of every stream touched, to enforce seq == last + 1.
  std::unordered_map<std::uint64_t, std::uint64_t> last_seqs;
  bool needs_resume = false;  // Writer thread only: the last write failed.

  std::uint64_t read_last_seq(std::uint64_t stream) const {
    std::string upper = journal_key(stream + 1, 0);
    rocksdb::Slice upper_slice(upper);  // Outlives the iterator.
    rocksdb::ReadOptions ro;
    ro.iterate_upper_bound = &upper_slice;
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(ro, cf));
    it->SeekToLast();
    if (!it->Valid()) return 0;
    auto key = it->key();
    if (key.size() != 16 || get_be64(key.data()) != stream) return 0;
    return get_be64(key.data() + 8);
  }

  // Checks the sequence numbers of one batch against `staged` (the last seqs including
  // batches already accepted into this group) and, if they hold, adds it to `wb`. Only the
  // streams the batch touches are looked at, so a group costs O(its size).
  error add_batch(const journal_batch& batch, rocksdb::WriteBatch& wb,
                  std::unordered_map<std::uint64_t, std::uint64_t>& staged) {
    std::unordered_map<std::uint64_t, std::uint64_t> touched;
    for (auto stream : batch.erase_streams) touched[stream] = 0;
    for (auto& a : batch.appends) {
      auto it = touched.find(a.stream);
      if (it == touched.end()) {
        std::uint64_t last;
        if (auto s = staged.find(a.stream); s != staged.end()) last = s->second;
        else if (auto k = last_seqs.find(a.stream); k != last_seqs.end()) last = k->second;
        else last = read_last_seq(a.stream);
        it = touched.emplace(a.stream, last).first;
      }
      if (a.first_seq != it->second + 1)
        return make_error(errc::internal, "journal stream " + std::to_string(a.stream) +
                                              " expected seq " + std::to_string(it->second + 1) +
                                              ", got " + std::to_string(a.first_seq));
      it->second = a.first_seq + a.records.size() - 1;
    }
    for (auto stream : batch.erase_streams) {
      wb.DeleteRange(cf, journal_key(stream, 0), journal_key(stream + 1, 0));
      wb.Delete(snapshot_cf, snapshot_key(stream));
    }
    for (auto& [stream, bytes] : batch.snapshots) wb.Put(snapshot_cf, snapshot_key(stream), bytes);
    for (auto& a : batch.appends) {
      std::uint64_t seq = a.first_seq;
      for (auto& r : a.records) wb.Put(cf, journal_key(a.stream, seq++), r);
    }
    for (auto& [stream, seq] : touched) staged[stream] = seq;
    return {};
  }

  void run_writer() {
    std::unique_lock lock(mutex);
    for (;;) {
      wake.wait(lock, [&] { return stopping || !queue.empty(); });
      if (queue.empty()) return;  // Stopping and drained.
      std::deque<pending> work;
      work.swap(queue);
      lock.unlock();

      // Group commit: every batch waiting now goes into one synced write. A batch with a
      // sequence gap (a bug in its writer) is refused alone and does not spoil the others.
      rocksdb::WriteBatch wb;
      std::unordered_map<std::uint64_t, std::uint64_t> staged;
      std::vector<error> results(work.size());
      for (std::size_t i = 0; i < work.size(); ++i) results[i] = add_batch(work[i].batch, wb, staged);
      bool wrote = false;
      if (needs_resume) {
        // The last write failed (e.g. the disk was full); RocksDB refuses writes until it
        // is resumed. If it cannot resume yet, this group fails like the last one.
        auto r = db->Resume();
        needs_resume = !r.ok();
      }
      if (wb.Count() > 0) {
        rocksdb::WriteOptions wo;
        wo.sync = options.sync;
        auto s = db->Write(wo, &wb);
        wrote = true;
        if (!s.ok()) {
          spdlog::error("event=journal_write_failed status=\"{}\" action=\"changes are refused until warrend is "
                        "restarted with room on the disk; nothing acknowledged is lost\"",
                        s.ToString());
          for (auto& r : results)
            if (!r) r = make_error(errc::journal_failed, "the journal could not write to disk");
          // What is on disk is unknown now: forget the cached seqs so they are re-read.
          staged.clear();
          last_seqs.clear();
          needs_resume = true;
        }
      }
      for (auto& [stream, seq] : staged) last_seqs[stream] = seq;
      {
        // Counted before the callbacks run, so a caller that was answered sees its batch.
        std::lock_guard count_lock(mutex);
        counters.batches += work.size();
        if (wrote) counters.writes += 1;
      }
      for (std::size_t i = 0; i < work.size(); ++i) {
        if (results[i] && results[i].code == errc::internal)
          spdlog::error("event=journal_batch_refused reason=\"{}\"", results[i].message);
        work[i].done(results[i]);
      }
      lock.lock();
    }
  }
};

}  // namespace warren::storage

namespace warren::storage {

journal::journal(std::unique_ptr<impl> p) : impl_(std::move(p)) {
  impl_->writer = std::thread([this] { impl_->run_writer(); });
}

journal::~journal() {
  {
    std::lock_guard lock(impl_->mutex);
    impl_->stopping = true;
  }
  impl_->wake.notify_all();
  if (impl_->writer.joinable()) impl_->writer.join();
  for (auto* h : impl_->handles) {
    auto s = impl_->db->DestroyColumnFamilyHandle(h);
    if (!s.ok()) spdlog::warn("event=journal_close status=\"{}\"", s.ToString());
  }
  impl_->handles.clear();
  auto s = impl_->db->Close();
  if (!s.ok()) spdlog::warn("event=journal_close status=\"{}\"", s.ToString());
}

std::unique_ptr<journal> journal::open(const journal_options& options, error& err) {
  rocksdb::Options db_options;
  db_options.create_if_missing = true;
  db_options.create_missing_column_families = true;
  // Small footprint: the journal is append-mostly and read on replay only.
  db_options.max_background_jobs = 2;
  db_options.info_log = std::make_shared<spdlog_logger>();

  std::vector<rocksdb::ColumnFamilyDescriptor> families = {
      {rocksdb::kDefaultColumnFamilyName, rocksdb::ColumnFamilyOptions()},
      {journal_cf_name, rocksdb::ColumnFamilyOptions()},
      {snapshot_cf_name, rocksdb::ColumnFamilyOptions()},
  };
  auto p = std::make_unique<impl>();
  p->options = options;
  rocksdb::DB* raw = nullptr;
  auto s = rocksdb::DB::Open(db_options, options.path, families, &p->handles, &raw);
  if (!s.ok()) {
    err = make_error(errc::journal_failed,
                     "cannot open the journal at " + options.path + ": " + s.ToString());
    return nullptr;
  }
  p->db.reset(raw);
  p->cf = p->handles[1];
  p->snapshot_cf = p->handles[2];
  return std::unique_ptr<journal>(new journal(std::move(p)));
}

void journal::append(journal_batch batch, append_callback done) {
  {
    std::lock_guard lock(impl_->mutex);
    if (!impl_->stopping) {
      impl_->queue.push_back({std::move(batch), std::move(done)});
      impl_->wake.notify_one();
      return;
    }
  }
  done(make_error(errc::shutting_down, "the journal is closing"));
}

std::vector<std::pair<std::uint64_t, std::string>> journal::read(std::uint64_t stream, std::uint64_t from_seq,
                                                                 std::size_t limit) const {
  std::vector<std::pair<std::uint64_t, std::string>> out;
  std::string upper = journal_key(stream + 1, 0);
  rocksdb::Slice upper_slice(upper);  // Outlives the iterator.
  rocksdb::ReadOptions ro;
  ro.iterate_upper_bound = &upper_slice;
  std::unique_ptr<rocksdb::Iterator> it(impl_->db->NewIterator(ro, impl_->cf));
  for (it->Seek(journal_key(stream, from_seq)); it->Valid() && (limit == 0 || out.size() < limit); it->Next()) {
    auto key = it->key();
    if (key.size() != 16) continue;
    out.emplace_back(get_be64(key.data() + 8), it->value().ToString());
  }
  return out;
}

std::uint64_t journal::last_seq(std::uint64_t stream) const { return impl_->read_last_seq(stream); }

std::optional<std::string> journal::load_snapshot(std::uint64_t stream) const {
  std::string value;
  auto s = impl_->db->Get(rocksdb::ReadOptions(), impl_->snapshot_cf, snapshot_key(stream), &value);
  if (!s.ok()) return std::nullopt;  // NotFound, or unreadable: either way, replay in full.
  return value;
}

journal::stats journal::get_stats() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->counters;
}

}  // namespace warren::storage
