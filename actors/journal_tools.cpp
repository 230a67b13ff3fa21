#include "actors/journal_tools.hpp"

#include "actors/registry_logic.hpp"
#include "actors/sandbox_logic.hpp"
#include "storage/journal.hpp"
#include "wire/events.hpp"

namespace warren::actors {

std::vector<journal_entry> read_entries(const storage::journal& j, std::uint64_t stream, std::uint64_t from_seq,
                                        std::uint32_t limit) {
  std::vector<journal_entry> out;
  for (auto& [seq, bytes] : j.read(stream, std::max<std::uint64_t>(from_seq, 1), limit)) {
    auto d = wire::decode_envelope(bytes);
    if (d.value) {
      out.push_back({seq, d.value->at_ms, wire::event_kind(d.value->body), wire::event_summary(d.value->body),
                     wire::event_json(d.value->body)});
    } else {
      auto why = d.skipped ? std::string("an event kind from a newer warren (skipped)") : d.error;
      out.push_back({seq, 0, d.skipped ? "unknown" : "corrupt", why, "{}"});
    }
  }
  return out;
}

namespace {

template <class Record>
error replay(const storage::journal& j, std::uint64_t stream, std::uint64_t at_seq, Record& rec) {
  std::uint64_t expected = 1;
  for (auto& [seq, bytes] : j.read(stream, 1, 0)) {
    if (at_seq != 0 && seq > at_seq) break;
    if (seq != expected)
      return make_error(errc::needs_repair, "event " + std::to_string(expected) + " is missing (next is " +
                                                std::to_string(seq) + ")");
    ++expected;
    auto d = wire::decode_envelope(bytes);
    if (d.skipped) continue;
    if (!d.value) return make_error(errc::needs_repair, "event " + std::to_string(seq) + ": " + d.error);
    if (d.value->seq != seq)
      return make_error(errc::needs_repair, "event " + std::to_string(seq) + " says it is event " +
                                                std::to_string(d.value->seq));
    apply(rec, *d.value);
  }
  return {};
}

}  // namespace

error state_at(const storage::journal& j, std::uint64_t stream, std::uint64_t at_seq, std::string& json) {
  sandbox_record rec;
  rec.id = stream;
  if (auto e = replay(j, stream, at_seq, rec)) return e;
  if (at_seq != 0 && rec.last_seq < at_seq)
    return make_error(errc::invalid_argument, "the journal has only " + std::to_string(rec.last_seq) + " events");
  json = record_json(rec);
  return {};
}

error check_stream(const storage::journal& j, std::uint64_t stream, bool registry) {
  if (registry) {
    registry_record rec;
    return replay(j, stream, 0, rec);
  }
  sandbox_record rec;
  return replay(j, stream, 0, rec);
}

}  // namespace warren::actors
