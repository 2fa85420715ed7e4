#include "test/test_certs.h"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <stdexcept>

namespace gpuaas::testing {
namespace {

std::string Pem(X509* cert) {
  BIO* b = BIO_new(BIO_s_mem());
  PEM_write_bio_X509(b, cert);
  char* data = nullptr;
  const long n = BIO_get_mem_data(b, &data);
  std::string out(data, static_cast<size_t>(n));
  BIO_free(b);
  return out;
}

std::string Pem(EVP_PKEY* key) {
  BIO* b = BIO_new(BIO_s_mem());
  PEM_write_bio_PrivateKey(b, key, nullptr, nullptr, 0, nullptr, nullptr);
  char* data = nullptr;
  const long n = BIO_get_mem_data(b, &data);
  std::string out(data, static_cast<size_t>(n));
  BIO_free(b);
  return out;
}

void AddExtension(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (ext == nullptr) throw std::runtime_error("bad extension");
  X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
}

// A certificate for `cn` with `key`, signed by `issuer`/`issuer_key` (itself when null).
X509* Certificate(const std::string& cn, EVP_PKEY* key, X509* issuer, EVP_PKEY* issuer_key, bool ca,
                  const char* san, long serial) {
  X509* cert = X509_new();
  X509_set_version(cert, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert), serial);
  X509_gmtime_adj(X509_getm_notBefore(cert), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert), 24 * 3600);
  X509_set_pubkey(cert, key);
  X509_NAME* name = X509_get_subject_name(cert);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509_set_issuer_name(cert, issuer ? X509_get_subject_name(issuer) : name);
  X509* signer = issuer ? issuer : cert;
  if (ca) {
    AddExtension(cert, signer, NID_basic_constraints, "critical,CA:TRUE");
    AddExtension(cert, signer, NID_key_usage, "critical,keyCertSign,cRLSign");
  } else {
    AddExtension(cert, signer, NID_basic_constraints, "critical,CA:FALSE");
    AddExtension(cert, signer, NID_key_usage, "critical,digitalSignature,keyEncipherment");
    AddExtension(cert, signer, NID_ext_key_usage, "serverAuth,clientAuth");
  }
  if (san != nullptr) AddExtension(cert, signer, NID_subject_alt_name, san);
  X509_sign(cert, issuer_key ? issuer_key : key, EVP_sha256());
  return cert;
}

}  // namespace

TestPki MakeTestPki(const std::string& client_cn) {
  TestPki pki;
  EVP_PKEY* ca_key = EVP_RSA_gen(2048);
  EVP_PKEY* server_key = EVP_RSA_gen(2048);
  EVP_PKEY* client_key = EVP_RSA_gen(2048);
  X509* ca = Certificate("gpuaas-test-ca", ca_key, nullptr, nullptr, true, nullptr, 1);
  X509* server = Certificate("127.0.0.1", server_key, ca, ca_key, false, "IP:127.0.0.1,DNS:localhost", 2);
  X509* client = Certificate(client_cn, client_key, ca, ca_key, false, nullptr, 3);
  pki.ca = {Pem(ca), Pem(ca_key)};
  pki.server = {Pem(server), Pem(server_key)};
  pki.client = {Pem(client), Pem(client_key)};
  X509_free(ca);
  X509_free(server);
  X509_free(client);
  EVP_PKEY_free(ca_key);
  EVP_PKEY_free(server_key);
  EVP_PKEY_free(client_key);
  return pki;
}

}  // namespace gpuaas::testing
