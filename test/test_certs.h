// Certificates for TLS tests, made with OpenSSL at test time: a certificate authority, a server
// certificate for 127.0.0.1 and a client certificate, each signed by the CA, all PEM.
#ifndef GPUAAS_TEST_TEST_CERTS_H_
#define GPUAAS_TEST_TEST_CERTS_H_

#include <string>

namespace gpuaas::testing {

struct KeyPair {
  std::string cert_pem;
  std::string key_pem;
};

struct TestPki {
  KeyPair ca;
  KeyPair server;  // CN and IP SAN 127.0.0.1
  KeyPair client;  // CN `client_cn`, for client authentication
};

// A fresh CA and the certificates it signs (RSA 2048, SHA-256, valid for a day).
TestPki MakeTestPki(const std::string& client_cn = "gpuaas-test-client");

}  // namespace gpuaas::testing

#endif  // GPUAAS_TEST_TEST_CERTS_H_
