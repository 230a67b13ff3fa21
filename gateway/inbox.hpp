// The one door from other threads into the gateway's KJ event loop: a queue of closures
// woken by an eventfd. CAF callbacks and the journal writer post here; the KJ thread drains
// the queue and runs the closures. Nothing else crosses from CAF to KJ.
#pragma once

#include <functional>
#include <memory>

namespace kj {
struct AsyncIoContext;
}

namespace warren::gateway {

class inbox {
 public:
  /// Must be constructed on the KJ thread of `io`.
  explicit inbox(kj::AsyncIoContext& io);
  ~inbox();

  /// Queues `f` to run on the KJ thread. Thread-safe, never blocks on the loop. After
  /// close(), closures are dropped without running.
  void post(std::function<void()> f);

  /// Stops accepting closures and drops the queued ones. KJ thread only.
  void close();

  struct impl;

 private:
  std::unique_ptr<impl> impl_;
};

}  // namespace warren::gateway
