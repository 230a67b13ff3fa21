// Internal to gateway/: turns the callback facade of actors::core into KJ promises.
// Fulfillers live only on the KJ thread, in a table keyed by an integer id; the CAF side
// carries the id and posts the result through the inbox. A cancelled promise removes its
// entry, so a late reply finds nothing and is dropped.
#pragma once

#include <kj/async.h>
#include <kj/function.h>

#include <memory>
#include <unordered_map>

#include "actors/types.hpp"
#include "gateway/inbox.hpp"

namespace warren::gateway {

/// The exception for an error value: description "code: message" (the public error format),
/// type FAILED for caller mistakes, OVERLOADED for "retry later" codes.
kj::Exception to_kj(const error& e);

class bridge {
 public:
  explicit bridge(inbox& box) : box_(box) {}

  /// Calls `start` with a callback that fulfills the returned promise on the KJ thread.
  template <class T>
  kj::Promise<T> call(kj::Function<void(actors::callback<T>)> start) {
    auto paf = kj::newPromiseAndFulfiller<T>();
    auto id = next_id_++;
    auto slot = std::make_unique<pending<T>>();
    slot->fulfiller = kj::mv(paf.fulfiller);
    table_.emplace(id, std::move(slot));
    inbox* box = &box_;
    start([this, box, id](const error& e, T value) {
      // On a CAF thread: only plain values cross.
      box->post([this, id, e, value = std::move(value)]() mutable { complete<T>(id, e, std::move(value)); });
    });
    return paf.promise.attach(kj::defer([this, id]() { table_.erase(id); }));
  }

  /// Rejects every pending call (used when the loop is about to end).
  void close() { table_.clear(); }

 private:
  struct pending_base {
    virtual ~pending_base() noexcept(false) = default;
  };
  template <class T>
  struct pending : pending_base {
    kj::Own<kj::PromiseFulfiller<T>> fulfiller;
  };

  template <class T>
  void complete(std::uint64_t id, const error& e, T value) {
    auto it = table_.find(id);
    if (it == table_.end()) return;  // The caller went away.
    auto slot = std::move(it->second);
    table_.erase(it);
    auto& f = *static_cast<pending<T>*>(slot.get())->fulfiller;
    if (e) f.reject(to_kj(e));
    else f.fulfill(kj::mv(value));
  }

  inbox& box_;
  std::uint64_t next_id_ = 1;
  std::unordered_map<std::uint64_t, std::unique_ptr<pending_base>> table_;  // KJ thread only.
};

}  // namespace warren::gateway
