// Mutual TLS 1.3 for allot links (docs/links.md sections 1 and 2).
//
//   auto ctx = makeTlsContext({"agent.crt", "agent.key", "ca.crt"}, TlsSide::kClient);
//   if (!ctx) { print ctx.error(); exit; }
//   Connection::Options o; o.tls = *ctx; o.tlsSide = TlsSide::kClient;
//
// Both sides present a certificate signed by the cluster's CA and verify the
// peer's: a server refuses a client without one. Only TLS 1.3 is offered.
// Identity comes from the certificate subject: the principal is its CN, the
// role its OU (master, agent, framework, operator). Host names are not
// checked: certificates name roles and principals, not hosts.
//
// Every TLS binary takes --tls-cert, --tls-key and --tls-ca (all three or
// none) through addTlsFlags()/tlsContextFromFlags().
//
// Thread: contexts are built once at start-up and then only read; a context
// may be shared by any number of connections on the daemon's loop.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <boost/asio/ssl.hpp>

#include "base/asio.h"
#include "base/flags.h"
#include "base/result.h"
#include "proto/allot.pb.h"
#include "proto/peer_identity.h"

namespace allot {

namespace ssl = boost::asio::ssl;

enum class TlsSide { kClient, kServer };

struct TlsFiles {
  std::string cert;  // PEM: our certificate (leaf first, then intermediates)
  std::string key;   // PEM: its private key
  std::string ca;    // PEM: the CA certificate(s) peers must chain to

  bool any() const { return !cert.empty() || !key.empty() || !ca.empty(); }
};

// A TLS 1.3 context that verifies peers against `files.ca` and presents
// `files.cert`. Server contexts require a client certificate. The error
// names the file that failed and OpenSSL's reason.
Result<std::shared_ptr<ssl::context>> makeTlsContext(const TlsFiles& files, TlsSide side);

// The certificate role ("master", "agent", "framework") a peer must hold to
// say `role` in its Hello; empty for roles no certificate may claim.
std::string certRoleFor(wire::Role role);

// Reads the subject CN and OU of the peer's verified certificate into
// `identity`. Error when there is no verified certificate.
Status readPeerCertificate(SSL* ssl, PeerIdentity* identity);

// Adds --tls-cert, --tls-key, --tls-ca to `flags`, writing into `files`.
void addTlsFlags(Flags& flags, TlsFiles* files);

// After parsing: null when no TLS flag was given (plaintext), a context when
// all three were, an error naming the missing flag(s) otherwise.
Result<std::shared_ptr<ssl::context>> tlsContextFromFlags(const TlsFiles& files, TlsSide side);

// Plaintext is for loopback (the embedded default): a server address given
// by `flag` that is reachable from the network needs TLS or --insecure.
// `serves` names what would go out plaintext ("plaintext", "the HTTP
// endpoints plaintext") in the error.
Status checkPlaintextOnLoopback(const std::string& flag, const std::string& host, bool tls, bool insecure,
                                const std::string& serves);

// Why a read on a peer link (plaintext or TLS) failed, for a close reason:
// "peer closed", "TLS: ..." or "read failed: ...".
std::string describeReadError(const boost::system::error_code& ec);

}  // namespace allot
