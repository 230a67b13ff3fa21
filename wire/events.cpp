#include "wire/events.hpp"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include <cstring>

#include "wire/journal.capnp.h"

namespace warren::wire {
namespace {

namespace j = warren::wire::journal;

template <class>
inline constexpr bool always_false = false;

void set_texts(capnp::List<capnp::Text>::Builder out, const std::vector<std::string>& in) {
  for (unsigned i = 0; i < in.size(); ++i) out.set(i, in[i]);
}

std::vector<std::string> get_texts(capnp::List<capnp::Text>::Reader in) {
  std::vector<std::string> out;
  out.reserve(in.size());
  for (auto t : in) out.emplace_back(t.cStr(), t.size());
  return out;
}

std::string str(capnp::Text::Reader t) { return std::string(t.cStr(), t.size()); }

}  // namespace

std::string encode_envelope(const envelope& e) {
  capnp::MallocMessageBuilder message(256);
  auto root = message.initRoot<j::Envelope>();
  root.setSeq(e.seq);
  root.setAtMs(e.at_ms);
  root.setSkippable(e.skippable);
  auto ev = root.getEvent();
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, sandbox_created>) {
          auto b = ev.initSandboxCreated();
          b.setName(x.name);
          b.setSandboxId(x.sandbox_id);
        } else if constexpr (std::is_same_v<T, sandbox_destroyed>) {
          auto b = ev.initSandboxDestroyed();
          b.setName(x.name);
          b.setSandboxId(x.sandbox_id);
        } else if constexpr (std::is_same_v<T, exec_started>) {
          auto b = ev.initExecStarted();
          b.setExecId(x.exec_id);
          set_texts(b.initArgv(x.argv.size()), x.argv);
          b.setCwd(x.cwd);
          set_texts(b.initEnvNames(x.env_names.size()), x.env_names);
          b.setTimeoutMs(x.timeout_ms);
        } else if constexpr (std::is_same_v<T, exec_finished>) {
          auto b = ev.initExecFinished();
          b.setExecId(x.exec_id);
          b.setExitCode(x.exit_code);
          b.setSignal(x.signal);
          b.setTimedOut(x.timed_out);
          b.setCancelled(x.cancelled);
          b.setDurationMs(x.duration_ms);
          b.setStdoutBytes(x.stdout_bytes);
          b.setStderrBytes(x.stderr_bytes);
          b.setFailed(x.failed);
        } else {
          static_assert(always_false<T>, "event kind without an encoder");
        }
      },
      e.body);
  auto words = capnp::messageToFlatArray(message);
  auto bytes = words.asBytes();
  return std::string(reinterpret_cast<const char*>(bytes.begin()), bytes.size());
}

decoded decode_envelope(std::string_view bytes) {
  decoded out;
  if (bytes.empty() || bytes.size() % sizeof(capnp::word) != 0) {
    out.error = "journal entry has " + std::to_string(bytes.size()) +
                " bytes, not a whole number of 8-byte words";
    return out;
  }
  // RocksDB values are not word-aligned: copy into an aligned buffer first.
  auto words = kj::heapArray<capnp::word>(bytes.size() / sizeof(capnp::word));
  std::memcpy(words.begin(), bytes.data(), bytes.size());
  try {
    capnp::FlatArrayMessageReader reader(words);
    auto root = reader.getRoot<j::Envelope>();
    envelope e;
    e.seq = root.getSeq();
    e.at_ms = root.getAtMs();
    e.skippable = root.getSkippable();
    auto ev = root.getEvent();
    switch (ev.which()) {
      case j::Envelope::Event::SANDBOX_CREATED: {
        auto r = ev.getSandboxCreated();
        e.body = sandbox_created{str(r.getName()), r.getSandboxId()};
        break;
      }
      case j::Envelope::Event::SANDBOX_DESTROYED: {
        auto r = ev.getSandboxDestroyed();
        e.body = sandbox_destroyed{str(r.getName()), r.getSandboxId()};
        break;
      }
      case j::Envelope::Event::EXEC_STARTED: {
        auto r = ev.getExecStarted();
        e.body = exec_started{r.getExecId(), get_texts(r.getArgv()), str(r.getCwd()),
                              get_texts(r.getEnvNames()), r.getTimeoutMs()};
        break;
      }
      case j::Envelope::Event::EXEC_FINISHED: {
        auto r = ev.getExecFinished();
        exec_finished f;
        f.exec_id = r.getExecId();
        f.exit_code = r.getExitCode();
        f.signal = r.getSignal();
        f.timed_out = r.getTimedOut();
        f.cancelled = r.getCancelled();
        f.duration_ms = r.getDurationMs();
        f.stdout_bytes = r.getStdoutBytes();
        f.stderr_bytes = r.getStderrBytes();
        f.failed = str(r.getFailed());
        e.body = std::move(f);
        break;
      }
      default:
        // A kind written by a newer daemon.
        if (e.skippable) {
          out.skipped = true;
        } else {
          out.error = "journal entry seq " + std::to_string(e.seq) +
                      " has an event kind this daemon does not know (" +
                      std::to_string(static_cast<unsigned>(ev.which())) + ")";
        }
        return out;
    }
    out.value = std::move(e);
  } catch (const kj::Exception& ex) {
    out.error = std::string("journal entry is not a valid envelope: ") + ex.getDescription().cStr();
  }
  return out;
}

const char* event_kind(const event& e) {
  static constexpr const char* kinds[] = {"sandbox_created", "sandbox_destroyed", "exec_started",
                                          "exec_finished"};
  return kinds[e.index()];
}

}  // namespace warren::wire
