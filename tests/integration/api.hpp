// A Cap'n Proto client of a test daemon, for tests that use the API directly.
#pragma once

#include <capnp/rpc-twoparty.h>
#include <kj/async-io.h>

#include <string>

#include "integration/harness.hpp"
#include "wire/files.capnp.h"
#include "wire/warren.capnp.h"

namespace warren::testing {

// A Cap'n Proto client of one daemon, with the Files capability of one sandbox.
struct api {
  kj::AsyncIoContext io = kj::setupAsyncIo();
  kj::Own<kj::AsyncIoStream> stream;
  kj::Own<capnp::TwoPartyClient> rpc;
  warren::wire::Warren::Client root = nullptr;

  explicit api(const warrend_process& d) {
    auto addr = io.provider->getNetwork().parseAddress("unix:" + d.socket).wait(io.waitScope);
    stream = addr->connect().wait(io.waitScope);
    rpc = kj::heap<capnp::TwoPartyClient>(*stream);
    root = rpc->bootstrap().castAs<warren::wire::Warren>();
  }

  warren::wire::Files::Client files(const std::string& name) {
    auto req = root.sandboxRequest();
    req.setName(name);
    return req.send().getSandbox().filesRequest().send().getFiles();
  }

  // Runs a request; returns "" or the error's "code: sentence" (without RPC decoration).
  template <class Req>
  std::string error_of(Req&& req) {
    try {
      req.send().wait(io.waitScope);
      return "";
    } catch (const kj::Exception& e) {
      std::string d = e.getDescription().cStr();
      const std::string prefix = "remote exception: ";
      while (d.rfind(prefix, 0) == 0) d = d.substr(prefix.size());
      return d;
    }
  }
};

inline capnp::Data::Reader bytes(const std::string& s) {
  return capnp::Data::Reader(reinterpret_cast<const kj::byte*>(s.data()), s.size());
}

inline std::string text(capnp::Data::Reader d) { return std::string(reinterpret_cast<const char*>(d.begin()), d.size()); }

}  // namespace warren::testing
