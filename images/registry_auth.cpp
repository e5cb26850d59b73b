// Credentials, WWW-Authenticate challenges and bearer tokens (distribution
// docs/spec/auth/token.md).
#include <openssl/evp.h>

#include <fstream>
#include <sstream>

#include <google/protobuf/util/json_util.h>

#include "base/encoding.h"
#include "images/oci.pb.h"
#include "images/registry_client.h"
#include "images/registry_session.h"

namespace allot::images {

namespace {

constexpr size_t kCredentialsMax = 1000;
constexpr size_t kChallengeParamsMax = 16;

std::string base64(const std::string& text) {
  std::string out(4 * ((text.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(text.data()), static_cast<int>(text.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

std::string encodeQuery(const std::string& value) { return percentEncode(value, uriUnreserved); }

// `Bearer realm="x",service="y"` -> scheme "bearer", {realm: x, service: y}.
Result<std::map<std::string, std::string>> parseChallenge(const std::string& text, std::string* scheme) {
  size_t space = text.find(' ');
  *scheme = text.substr(0, space);
  for (char& c : *scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::map<std::string, std::string> params;
  size_t i = space == std::string::npos ? text.size() : space + 1;
  while (i < text.size()) {
    while (i < text.size() && (text[i] == ' ' || text[i] == ',')) ++i;
    size_t eq = text.find('=', i);
    if (eq == std::string::npos) break;
    std::string key = text.substr(i, eq - i);
    std::string value;
    i = eq + 1;
    if (i < text.size() && text[i] == '"') {
      size_t close = text.find('"', i + 1);
      if (close == std::string::npos) return Error{"WWW-Authenticate: unterminated quote"};
      value = text.substr(i + 1, close - i - 1);
      i = close + 1;
    } else {
      size_t comma = text.find(',', i);
      value = text.substr(i, comma - i);
      i = comma == std::string::npos ? text.size() : comma;
    }
    if (params.size() >= kChallengeParamsMax) return Error{"WWW-Authenticate: too many parameters"};
    for (char& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    params[key] = value;
  }
  return params;
}

}  // namespace

Status RegistryClient::loadCredentials() {
  if (options_.credentialsFile.empty()) return okStatus();
  std::ifstream in(options_.credentialsFile);
  if (!in) return Error::fromErrno("registry credentials " + options_.credentialsFile);
  std::string text(kCredentialsFileBytesMax + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kCredentialsFileBytesMax)
    return Error{"registry credentials " + options_.credentialsFile + ": larger than " +
                 std::to_string(kCredentialsFileBytesMax) + " bytes"};
  std::istringstream lines(text);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    std::istringstream words(line);
    std::string registry, user, password, extra;
    if (!(words >> registry) || registry.front() == '#') continue;
    if (!(words >> user >> password) || (words >> extra) || credentials_.size() >= kCredentialsMax)
      return Error{"registry credentials " + options_.credentialsFile + " line " + std::to_string(number) +
                   ": expected REGISTRY USER PASSWORD"};
    credentials_[registry] = Credentials{user, password};
  }
  return okStatus();
}

Status RegistryClient::authenticate(Session& session, const std::string& challenge) {
  std::string scheme;
  Result<std::map<std::string, std::string>> params = parseChallenge(challenge, &scheme);
  if (!params) return params.error();
  auto creds = credentials_.find(session.registry);
  if (scheme == "basic") {
    if (creds == credentials_.end())
      return Error{"registry " + session.registry + " asks for a password and the credentials file has none for it"};
    session.authorization = "Basic " + base64(creds->second.user + ":" + creds->second.password);
    return okStatus();
  }
  if (scheme != "bearer") return Error{"registry " + session.registry + ": unsupported authentication '" + scheme + "'"};
  return fetchToken(session, *params);
}

Status RegistryClient::fetchToken(Session& session, const std::map<std::string, std::string>& params) {
  auto realm = params.find("realm");
  if (realm == params.end()) return Error{"registry " + session.registry + ": bearer challenge without a realm"};
  Result<Url> url = parseUrl(realm->second);
  if (!url) return Error{"registry " + session.registry + ": token realm: " + url.error().message};
  if (!url->tls && !allowsPlain(*url))
    return Error{"registry " + session.registry + ": token realm " + realm->second + " is plain HTTP"};
  auto scope = params.find("scope");
  std::string query = "scope=" + encodeQuery(scope != params.end() ? scope->second
                                                                    : "repository:" + session.repository + ":pull");
  if (auto service = params.find("service"); service != params.end())
    query += "&service=" + encodeQuery(service->second);
  url->target += (url->target.find('?') == std::string::npos ? "?" : "&") + query;
  std::vector<std::pair<std::string, std::string>> headers;
  if (auto creds = credentials_.find(session.registry); creds != credentials_.end())
    headers.emplace_back("Authorization", "Basic " + base64(creds->second.user + ":" + creds->second.password));
  Result<HttpAnswer> answer = httpGet(*url, headers, kTokenAnswerBytesMax, nullptr,
                                      {.tls = tls_, .ioTimeout = options_.ioTimeout});
  if (!answer) return Error{"registry " + session.registry + ": token: " + answer.error().message};
  if (answer->status != 200)
    return Error{"registry " + session.registry + ": token realm answered " + std::to_string(answer->status)};
  oci::TokenAnswer token;
  google::protobuf::util::JsonParseOptions parse;
  parse.ignore_unknown_fields = true;
  if (!google::protobuf::util::JsonStringToMessage(answer->body, &token, parse).ok())
    return Error{"registry " + session.registry + ": token answer is not JSON"};
  std::string value = token.token().empty() ? token.access_token() : token.token();
  if (value.empty() || value.find_first_of("\r\n") != std::string::npos)
    return Error{"registry " + session.registry + ": token answer has no usable token"};
  session.authorization = "Bearer " + value;
  return okStatus();
}

}  // namespace allot::images
