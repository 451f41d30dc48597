#ifndef RECEPTIONIST_CCURL_SHIM_H
#define RECEPTIONIST_CCURL_SHIM_H
#include <curl/curl.h>

// curl_easy_setopt, curl_multi_setopt and curl_easy_getinfo are variadic, which Swift cannot
// call: these wrappers pass each kind of argument with its own type.

static inline CURLcode receptionist_curl_easy_long(CURL *easy, CURLoption option, long value) {
    return curl_easy_setopt(easy, option, value);
}

static inline CURLcode receptionist_curl_easy_pointer(CURL *easy, CURLoption option, void *value) {
    return curl_easy_setopt(easy, option, value);
}

static inline CURLcode receptionist_curl_easy_string(CURL *easy, CURLoption option, const char *value) {
    return curl_easy_setopt(easy, option, value);
}

typedef size_t (*receptionist_curl_write_callback)(char *data, size_t size, size_t count, void *context);

static inline CURLcode receptionist_curl_easy_write_function(CURL *easy, receptionist_curl_write_callback callback) {
    return curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, callback);
}

static inline long receptionist_curl_easy_status(CURL *easy) {
    long status = 0;
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
    return status;
}

static inline void *receptionist_curl_easy_private(CURL *easy) {
    char *context = NULL;
    curl_easy_getinfo(easy, CURLINFO_PRIVATE, &context);
    return context;
}

typedef int (*receptionist_curl_socket_callback)(CURL *easy, curl_socket_t socket, int action, void *context, void *socketContext);
typedef int (*receptionist_curl_timer_callback)(CURLM *multi, long timeoutMilliseconds, void *context);

static inline CURLMcode receptionist_curl_multi_callbacks(
    CURLM *multi, receptionist_curl_socket_callback onSocket, receptionist_curl_timer_callback onTimer, void *context) {
    CURLMcode status = curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, onSocket);
    if (status == CURLM_OK) status = curl_multi_setopt(multi, CURLMOPT_SOCKETDATA, context);
    if (status == CURLM_OK) status = curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, onTimer);
    if (status == CURLM_OK) status = curl_multi_setopt(multi, CURLMOPT_TIMERDATA, context);
    return status;
}

static inline CURLMcode receptionist_curl_multi_long(CURLM *multi, CURLMoption option, long value) {
    return curl_multi_setopt(multi, option, value);
}

// A finished transfer's result: CURLMsg keeps it in a union.
static inline CURLcode receptionist_curl_message_result(CURLMsg *message) {
    return message->data.result;
}
#endif
