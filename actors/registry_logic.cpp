#include "actors/registry_logic.hpp"

#include <algorithm>

namespace warren::actors {

error validate_snapshot_label(const std::string& label) {
  bool ok = label.size() <= 63;
  for (char c : label) ok = ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_');
  if (!ok) return make_error(errc::invalid_argument, "snapshot labels are at most 63 characters of a-z, 0-9, '-' and '_'");
  return {};
}

void apply(registry_record& rec, const wire::envelope& e) {
  rec.last_seq = e.seq;
  if (auto* c = std::get_if<wire::sandbox_created>(&e.body)) {
    registry_entry entry;
    entry.id = c->sandbox_id;
    entry.created_at_ms = entry.last_activity_ms = e.at_ms;
    rec.names[c->name] = entry;
    rec.next_id = std::max(rec.next_id, c->sandbox_id + 1);
  } else if (auto* d = std::get_if<wire::sandbox_destroyed>(&e.body)) {
    auto it = rec.names.find(d->name);
    if (it != rec.names.end() && it->second.id == d->sandbox_id) rec.names.erase(it);
    rec.next_id = std::max(rec.next_id, d->sandbox_id + 1);
  } else if (auto* h = std::get_if<wire::sandbox_hibernated>(&e.body)) {
    auto it = rec.names.find(h->name);
    if (it != rec.names.end() && it->second.id == h->sandbox_id) it->second.hibernated = true;
  } else if (auto* w = std::get_if<wire::sandbox_woke>(&e.body)) {
    auto it = rec.names.find(w->name);
    if (it != rec.names.end() && it->second.id == w->sandbox_id) it->second.hibernated = false;
  } else if (auto* t = std::get_if<wire::snapshot_taken>(&e.body)) {
    rec.snapshots[t->snapshot_id] = {*t, e.at_ms};
    rec.next_id = std::max(rec.next_id, t->snapshot_id + 1);
  } else if (auto* x = std::get_if<wire::snapshot_deleted>(&e.body)) {
    rec.snapshots.erase(x->snapshot_id);
  } else if (auto* b = std::get_if<wire::backup_created>(&e.body)) {
    rec.backups[b->backup_id] = {*b, e.at_ms};
  } else if (auto* bd = std::get_if<wire::backup_deleted>(&e.body)) {
    rec.backups.erase(bd->backup_id);
  } else if (auto* k = std::get_if<wire::sandbox_configured>(&e.body)) {
    auto it = rec.names.find(k->name);
    if (it != rec.names.end() && it->second.id == k->sandbox_id) {
      it->second.sleep_after_ms = k->sleep_after_ms;
      it->second.keep_alive = k->keep_alive;
    }
  }
}

}  // namespace warren::actors

namespace warren::actors {

wire::registry_snapshot to_snapshot(const registry_record& rec) {
  wire::registry_snapshot s;
  s.seq = rec.last_seq;
  s.next_id = rec.next_id;
  s.entries.reserve(rec.names.size());
  for (auto& [name, e] : rec.names)
    s.entries.push_back({name, e.id, e.created_at_ms, e.sleep_after_ms, e.keep_alive, e.hibernated});
  for (auto& [id, snap] : rec.snapshots) s.snapshots.push_back(snap);
  for (auto& [id, b] : rec.backups) s.backups.push_back(b);
  return s;
}

registry_record from_snapshot(const wire::registry_snapshot& s) {
  registry_record rec;
  rec.last_seq = s.seq;
  rec.next_id = s.next_id;
  rec.names.reserve(s.entries.size());
  for (auto& e : s.entries) {
    registry_entry entry;
    entry.id = e.sandbox_id;
    entry.created_at_ms = entry.last_activity_ms = e.created_at_ms;
    entry.sleep_after_ms = e.sleep_after_ms;
    entry.keep_alive = e.keep_alive;
    entry.hibernated = e.hibernated;
    rec.names.emplace(e.name, entry);
  }
  for (auto& snap : s.snapshots) rec.snapshots[snap.taken.snapshot_id] = snap;
  for (auto& b : s.backups) rec.backups[b.created.backup_id] = b;
  return rec;
}

}  // namespace warren::actors
