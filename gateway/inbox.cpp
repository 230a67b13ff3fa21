#include "gateway/inbox.hpp"

#include <kj/async-io.h>
#include <kj/async-unix.h>
#include <spdlog/spdlog.h>

#include <sys/eventfd.h>
#include <unistd.h>

#include <mutex>
#include <vector>

namespace warren::gateway {

struct inbox::impl {
  int efd = -1;
  std::mutex mutex;
  std::vector<std::function<void()>> queue;  // Guarded by mutex.
  bool closed = false;                        // Guarded by mutex.
  kj::Own<kj::UnixEventPort::FdObserver> observer;
  kj::Promise<void> loop = nullptr;

  kj::Promise<void> drain() {
    return observer->whenBecomesReadable().then([this]() {
      std::uint64_t n;
      while (::read(efd, &n, sizeof n) > 0) {
      }
      std::vector<std::function<void()>> work;
      {
        std::lock_guard lock(mutex);
        work.swap(queue);
      }
      for (auto& f : work) f();
      return drain();
    });
  }
};

inbox::inbox(kj::AsyncIoContext& io) : impl_(std::make_unique<impl>()) {
  impl_->efd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (impl_->efd < 0) throw std::runtime_error("eventfd failed");
  impl_->observer = kj::heap<kj::UnixEventPort::FdObserver>(io.unixEventPort, impl_->efd,
                                                              kj::UnixEventPort::FdObserver::OBSERVE_READ);
  impl_->loop = impl_->drain().eagerlyEvaluate([](kj::Exception&& e) {
    spdlog::error("event=inbox_failed reason=\"{}\"", e.getDescription().cStr());
  });
}

inbox::~inbox() {
  close();
  impl_->loop = nullptr;
  impl_->observer = nullptr;
  ::close(impl_->efd);
}

void inbox::post(std::function<void()> f) {
  {
    std::lock_guard lock(impl_->mutex);
    if (impl_->closed) return;
    impl_->queue.push_back(std::move(f));
  }
  std::uint64_t one = 1;
  // EAGAIN only when the counter is saturated, which still wakes the loop.
  [[maybe_unused]] auto n = ::write(impl_->efd, &one, sizeof one);
}

void inbox::close() {
  std::vector<std::function<void()>> dropped;
  std::lock_guard lock(impl_->mutex);
  impl_->closed = true;
  dropped.swap(impl_->queue);
}

}  // namespace warren::gateway
