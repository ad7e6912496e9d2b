// RNIC_TEST_ASAN is defined when the test is built with AddressSanitizer (the sanitizer tree):
// gcc says so with __SANITIZE_ADDRESS__, clang with __has_feature(address_sanitizer).
#pragma once

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RNIC_TEST_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(RNIC_TEST_ASAN)
#define RNIC_TEST_ASAN 1
#endif
