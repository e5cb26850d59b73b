#include "proto/tls.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

namespace allot {

namespace {

// The session id context a server needs once clients present certificates
// (OpenSSL refuses resumption without one); any stable bytes will do.
constexpr unsigned char kSessionIdContext[] = "allot";

std::string describeSslError(const boost::system::error_code& ec) {
  std::string text = ec.message();
  // Asio's message for an OpenSSL error is the reason string alone; the
  // queue may hold more detail (the file, the line in it).
  unsigned long code = ERR_get_error();
  if (code != 0) {
    char buffer[256];
    ERR_error_string_n(code, buffer, sizeof buffer);
    if (text.find(buffer) == std::string::npos) text += " (" + std::string(buffer) + ")";
  }
  ERR_clear_error();
  return text;
}

std::string subjectEntry(X509_NAME* name, int nid) {
  int index = X509_NAME_get_index_by_NID(name, nid, -1);
  if (index < 0) return {};
  ASN1_STRING* data = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, index));
  unsigned char* utf8 = nullptr;
  int length = ASN1_STRING_to_UTF8(&utf8, data);
  if (length < 0) return {};
  std::string text(reinterpret_cast<char*>(utf8), static_cast<size_t>(length));
  OPENSSL_free(utf8);
  return text;
}

}  // namespace

Result<std::shared_ptr<ssl::context>> makeTlsContext(const TlsFiles& files, TlsSide side) {
  ERR_clear_error();
  auto ctx = std::make_shared<ssl::context>(side == TlsSide::kServer ? ssl::context::tlsv13_server
                                                                     : ssl::context::tlsv13_client);
  boost::system::error_code ec;
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_compression, ec);
  ctx->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert, ec);
  if (ec) return Error{"TLS context: " + describeSslError(ec)};
  ctx->load_verify_file(files.ca, ec);
  if (ec) return Error{"TLS CA file '" + files.ca + "': " + describeSslError(ec)};
  ctx->use_certificate_chain_file(files.cert, ec);
  if (ec) return Error{"TLS certificate file '" + files.cert + "': " + describeSslError(ec)};
  ctx->use_private_key_file(files.key, ssl::context::pem, ec);
  if (ec) return Error{"TLS key file '" + files.key + "': " + describeSslError(ec)};
  SSL_CTX* native = ctx->native_handle();
  if (SSL_CTX_check_private_key(native) != 1) {
    ERR_clear_error();
    return Error{"TLS key file '" + files.key + "' does not match certificate '" + files.cert + "'"};
  }
  // Idle links (thousands of agents) keep no record buffers.
  SSL_CTX_set_mode(native, SSL_MODE_RELEASE_BUFFERS);
  if (side == TlsSide::kServer) {
    SSL_CTX_set_session_id_context(native, kSessionIdContext, sizeof kSessionIdContext - 1);
    // No TLS 1.3 session tickets. OpenSSL sends two after every handshake by
    // default; each one serializes the session with the client's certificate
    // and encrypts it, and the client parses both. No allot client resumes
    // (a reconnecting agent usually meets a new leader, whose ticket keys
    // differ), so that work is pure cost: docs/benchmarks.md "TLS handshakes".
    SSL_CTX_set_num_tickets(native, 0);
    SSL_CTX_set_session_cache_mode(native, SSL_SESS_CACHE_OFF);
  }
  return ctx;
}

std::string PeerIdentity::describe() const {
  std::string text;
  if (tls) text = "principal " + principal + " (" + certRole + ")";
  if (uid) {
    if (!text.empty()) text += ", ";
    text += "uid " + std::to_string(*uid) + " pid " + std::to_string(pid.value_or(0));
  }
  return text.empty() ? "anonymous" : text;
}

std::string certRoleFor(wire::Role role) {
  switch (role) {
    case wire::ROLE_MASTER: return "master";
    case wire::ROLE_AGENT: return "agent";
    case wire::ROLE_SCHEDULER: return "framework";
    default: return {};
  }
}

Status readPeerCertificate(SSL* ssl, PeerIdentity* identity) {
  X509* cert = SSL_get0_peer_certificate(ssl);
  if (cert == nullptr) return Error{"peer presented no certificate"};
  if (long result = SSL_get_verify_result(ssl); result != X509_V_OK) {
    return Error{std::string("peer certificate not verified: ") +
                 X509_verify_cert_error_string(result)};
  }
  X509_NAME* subject = X509_get_subject_name(cert);
  identity->tls = true;
  identity->principal = subjectEntry(subject, NID_commonName);
  identity->certRole = subjectEntry(subject, NID_organizationalUnitName);
  if (identity->principal.empty()) return Error{"peer certificate has no subject CN"};
  if (identity->certRole.empty()) return Error{"peer certificate has no subject OU (role)"};
  return okStatus();
}

void addTlsFlags(Flags& flags, TlsFiles* files) {
  flags.addString("tls-cert", &files->cert,
                  "PEM certificate for mutual TLS 1.3 (with --tls-key and --tls-ca)");
  flags.addString("tls-key", &files->key, "PEM private key of --tls-cert");
  flags.addString("tls-ca", &files->ca, "PEM CA certificate that peers' certificates chain to");
}

Result<std::shared_ptr<ssl::context>> tlsContextFromFlags(const TlsFiles& files, TlsSide side) {
  if (!files.any()) return std::shared_ptr<ssl::context>();
  std::string missing;
  if (files.cert.empty()) missing += " --tls-cert";
  if (files.key.empty()) missing += " --tls-key";
  if (files.ca.empty()) missing += " --tls-ca";
  if (!missing.empty()) {
    return Error{"TLS needs --tls-cert, --tls-key and --tls-ca together; missing:" + missing};
  }
  return makeTlsContext(files, side);
}

Status checkPlaintextOnLoopback(const std::string& flag, const std::string& host, bool tls, bool insecure,
                                const std::string& serves) {
  if (tls || insecure) return okStatus();
  boost::system::error_code ec;
  auto address = asio::ip::make_address(host, ec);
  if (!ec && address.is_loopback()) return okStatus();
  return Error{flag + " " + host + " is not a loopback address: give --tls-cert, --tls-key and --tls-ca, or " +
               "--insecure to serve " + serves + " to the network"};
}

std::string describeReadError(const boost::system::error_code& ec) {
  if (ec == asio::error::eof || ec == ssl::error::stream_truncated) return "peer closed";
  if (ec.category() == asio::error::get_ssl_category()) return "TLS: " + ec.message();
  return "read failed: " + ec.message();
}

}  // namespace allot
