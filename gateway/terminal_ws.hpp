// Internal to gateway/: terminals over WebSocket on the daemon's HTTP listener, in the
// protocol xterm.js front ends and Cloudflare's sandbox terminals speak: binary frames carry
// bytes both ways; text frames carry JSON control messages ({"type":"resize","cols":N,
// "rows":N} from the client; {"type":"ready"}, {"type":"exit","code":N},
// {"type":"error","message":...} from the daemon).
#pragma once

#include <kj/compat/http.h>

namespace warren::gateway {

struct rpc_context;

/// Paths this serves: /terminal/{sandbox}/ws?...
bool is_terminal_path(kj::StringPtr url);

/// GET /terminal/{sandbox}/ws?token=T[&id=ID][&session=S][&cols=N&rows=N] with a WebSocket
/// upgrade (the token may come as "Authorization: Bearer T" instead). Without `id`, a new
/// terminal (bash on a pty, in the session's environment and directory); with it, that
/// terminal, its screen replayed from its buffer first. The sandbox is woken if it sleeps
/// and held awake while the socket is open.
kj::Promise<void> serve_terminal(rpc_context& ctx, kj::HttpHeaderTable& table, kj::StringPtr url,
                                 const kj::HttpHeaders& headers, kj::HttpService::Response& response);

}  // namespace warren::gateway
