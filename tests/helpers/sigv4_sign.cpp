// Prints the Authorization header Amphora's SigV4 code gives a request, so
// that tests can send it to a real S3 server (tests/python/test_rgw.py):
//   amphora_sigv4_sign METHOD PATH AMZ_DATE PAYLOAD_SHA256 [q:NAME=VALUE | h:NAME:VALUE]...
// Credentials as the remote tier finds them (environment, credentials file).

#include "credentials.hpp"
#include "sigv4.hpp"

#include <amphora/error.hpp>

#include <iostream>
#include <string>

int main(int argc, char** argv) {
  if (argc < 5) {
    std::cerr << "usage: amphora_sigv4_sign METHOD PATH AMZ_DATE PAYLOAD_SHA256 [q:NAME=VALUE | h:NAME:VALUE]...\n";
    return 2;
  }
  namespace s = amphora::detail::sigv4;
  s::Request request{argv[1], argv[2], {}, {}, argv[4]};
  for (int i = 5; i < argc; ++i) {
    const std::string item = argv[i];
    const auto split = item.find(item.starts_with("q:") ? '=' : ':', 2);
    if (split == std::string::npos || !(item.starts_with("q:") || item.starts_with("h:"))) {
      std::cerr << "amphora_sigv4_sign: '" << item << "' is neither q:NAME=VALUE nor h:NAME:VALUE\n";
      return 2;
    }
    (item[0] == 'q' ? request.query : request.headers).emplace_back(item.substr(2, split - 2), item.substr(split + 1));
  }
  try {
    std::cout << s::authorization(request, s::find_credentials(s::process_environment()), argv[3], "us-east-1") << "\n";
  } catch (const amphora::Error& e) {
    std::cerr << "amphora_sigv4_sign: " << e.what() << "\n";
    return 1;
  }
}
