#ifndef RECEPTIONIST_COPENSSL_SHIM_H
#define RECEPTIONIST_COPENSSL_SHIM_H
#include <openssl/sha.h>
#include <openssl/hmac.h>
#include <openssl/evp.h>
#include <openssl/crypto.h>
#endif
