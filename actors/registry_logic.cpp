#include "actors/registry_logic.hpp"

#include <algorithm>

namespace warren::actors {

void apply(registry_record& rec, const wire::envelope& e) {
  rec.last_seq = e.seq;
  if (auto* c = std::get_if<wire::sandbox_created>(&e.body)) {
    rec.names[c->name] = registry_entry{c->sandbox_id, e.at_ms};
    rec.next_id = std::max(rec.next_id, c->sandbox_id + 1);
  } else if (auto* d = std::get_if<wire::sandbox_destroyed>(&e.body)) {
    auto it = rec.names.find(d->name);
    if (it != rec.names.end() && it->second.id == d->sandbox_id) rec.names.erase(it);
    rec.next_id = std::max(rec.next_id, d->sandbox_id + 1);
  }
}

}  // namespace warren::actors
