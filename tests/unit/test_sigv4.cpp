// AWS Signature Version 4, held to the worked examples of AWS's S3
// documentation ("Examples: Signature Calculations" and the browser POST
// example): same canonical request, string to sign and signature, byte for
// byte, with AWS's example credentials. Then where credentials come from.

#include "credentials.hpp"
#include "sigv4.hpp"
#include "support.hpp"

#include <amphora/error.hpp>
#include <catch2/catch.hpp>

#include <fstream>
#include <functional>
#include <map>
#include <sys/stat.h>

using namespace amphora::detail::sigv4;

namespace {

const Credentials kExample{"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", ""};
constexpr const char* kEmptySha256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
constexpr const char* kHost = "examplebucket.s3.amazonaws.com";

std::string signature_of(const std::string& authorization) {
  return authorization.substr(authorization.find("Signature=") + 10);
}

}  // namespace

TEST_CASE("GET Object with a range signs as AWS's example does", "[sigv4]") {
  Request get{"GET", "/test.txt", {},
              {{"Host", kHost}, {"Range", "bytes=0-9"}, {"x-amz-content-sha256", kEmptySha256},
               {"x-amz-date", "20130524T000000Z"}},
              kEmptySha256};
  const std::string canonical = canonical_request(get);
  CHECK(canonical == std::string("GET\n/test.txt\n\nhost:examplebucket.s3.amazonaws.com\nrange:bytes=0-9\n") +
                         "x-amz-content-sha256:" + kEmptySha256 + "\nx-amz-date:20130524T000000Z\n\n" +
                         "host;range;x-amz-content-sha256;x-amz-date\n" + kEmptySha256);
  CHECK(string_to_sign("20130524T000000Z", scope("20130524T000000Z", "us-east-1", "s3"), canonical) ==
        "AWS4-HMAC-SHA256\n20130524T000000Z\n20130524/us-east-1/s3/aws4_request\n"
        "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972");
  CHECK(authorization(get, kExample, "20130524T000000Z", "us-east-1") ==
        "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
        "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
        "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

TEST_CASE("PUT Object, a bucket's lifecycle and a listing sign as AWS's examples do", "[sigv4]") {
  const std::string body_sha256 = "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072";
  Request put{"PUT", "/test$file.text", {},
              {{"Date", "Fri, 24 May 2013 00:00:00 GMT"}, {"Host", kHost}, {"x-amz-date", "20130524T000000Z"},
               {"x-amz-storage-class", "REDUCED_REDUNDANCY"}, {"x-amz-content-sha256", body_sha256}},
              body_sha256};
  CHECK(canonical_request(put).starts_with("PUT\n/test%24file.text\n\n"));
  CHECK(signature_of(authorization(put, kExample, "20130524T000000Z", "us-east-1")) ==
        "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd");

  Request lifecycle{"GET", "/", {{"lifecycle", ""}},
                    {{"Host", kHost}, {"x-amz-date", "20130524T000000Z"}, {"x-amz-content-sha256", kEmptySha256}},
                    kEmptySha256};
  CHECK(canonical_request(lifecycle).starts_with("GET\n/\nlifecycle=\n"));
  CHECK(signature_of(authorization(lifecycle, kExample, "20130524T000000Z", "us-east-1")) ==
        "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543");

  // Parameters given out of order are sorted.
  Request listing{"GET", "/", {{"prefix", "J"}, {"max-keys", "2"}},
                  {{"Host", kHost}, {"x-amz-date", "20130524T000000Z"}, {"x-amz-content-sha256", kEmptySha256}},
                  kEmptySha256};
  CHECK(canonical_request(listing).starts_with("GET\n/\nmax-keys=2&prefix=J\n"));
  CHECK(signature_of(authorization(listing, kExample, "20130524T000000Z", "us-east-1")) ==
        "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7");
}

TEST_CASE("The signing key signs a browser POST policy as AWS's example does", "[sigv4]") {
  const std::string policy =
      "eyAiZXhwaXJhdGlvbiI6ICIyMDEzLTA4LTA3VDEyOjAwOjAwLjAwMFoiLA0KICAiY29uZGl0aW9ucyI6IFsNCiAgICB7ImJ1Y2tldCI6ICJleGFt"
      "cGxlYnVja2V0In0sDQogICAgWyJzdGFydHMtd2l0aCIsICIka2V5IiwgInVzZXIvdXNlcjEvIl0sDQogICAgeyJhY2wiOiAicHVibGljLXJlYWQi"
      "fSwNCiAgICB7InN1Y2Nlc3NfYWN0aW9uX3JlZGlyZWN0IjogImh0dHA6Ly9leGFtcGxlYnVja2V0LnMzLmFtYXpvbmF3cy5jb20vc3VjY2Vzc2Z1"
      "bF91cGxvYWQuaHRtbCJ9LA0KICAgIFsic3RhcnRzLXdpdGgiLCAiJENvbnRlbnQtVHlwZSIsICJpbWFnZS8iXSwNCiAgICB7IngtYW16LW1ldGEt"
      "dXVpZCI6ICIxNDM2NTEyMzY1MTI3NCJ9LA0KICAgIFsic3RhcnRzLXdpdGgiLCAiJHgtYW16LW1ldGEtdGFnIiwgIiJdLA0KDQogICAgeyJ4LWFt"
      "ei1jcmVkZW50aWFsIjogIkFLSUFJT1NGT0ROTjdFWEFNUExFLzIwMTMwODA2L3VzLWVhc3QtMS9zMy9hd3M0X3JlcXVlc3QifSwNCiAgICB7Ingt"
      "YW16LWFsZ29yaXRobSI6ICJBV1M0LUhNQUMtU0hBMjU2In0sDQogICAgeyJ4LWFtei1kYXRlIjogIjIwMTMwODA2VDAwMDAwMFoiIH0NCiAgXQ0K"
      "fQ==";
  CHECK(hex_hmac(signing_key(kExample.secret_key, "20130806", "us-east-1", "s3"), policy) ==
        "21496b44de44ccb73d545f1a995c68214c9cb0d41c45a17a5daeec0b1a6db047");
}

TEST_CASE("Canonical forms: encoding, header folding, refusals", "[sigv4]") {
  CHECK(uri_encode("a b/c~d_e.f-g", true) == "a%20b/c~d_e.f-g");
  CHECK(uri_encode("a b/c", false) == "a%20b%2Fc");
  CHECK(uri_encode("\xc3\xa9*+=&", false) == "%C3%A9%2A%2B%3D%26");
  // Names lower-cased, values trimmed and inner runs of spaces made one,
  // one name given twice joined by a comma.
  Request r{"GET", "/k", {}, {{"X-Amz-Meta-A", "  one   two "}, {"x-amz-meta-a", "three"}, {"Host", "h"}}, "UNSIGNED-PAYLOAD"};
  CHECK(canonical_request(r) == "GET\n/k\n\nhost:h\nx-amz-meta-a:one two,three\n\nhost;x-amz-meta-a\nUNSIGNED-PAYLOAD");
  Request injected{"GET", "/k", {}, {{"Host", "h\r\nx-evil: 1"}}, "UNSIGNED-PAYLOAD"};
  CHECK_THROWS_AS(canonical_request(injected), amphora::InvalidArgument);
  CHECK_THROWS_AS(authorization(r, kExample, "2013-05-24", "us-east-1"), amphora::InvalidArgument);
}

// ------------------------------------------------------------ credentials

namespace {

Environment environment_of(std::map<std::string, std::string> values) {
  return [values = std::move(values)](std::string_view name) -> std::optional<std::string> {
    auto it = values.find(std::string(name));
    if (it == values.end()) return std::nullopt;
    return it->second;
  };
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const amphora::Error& e) {
    return e.what();
  }
  return "(nothing thrown)";
}

}  // namespace

TEST_CASE("Credentials come from the environment, else the shared credentials file's profile", "[sigv4][credentials]") {
  test::TempDir dir;
  const auto file = dir / "credentials";
  std::ofstream(file) << "# team keys\n[default]\naws_access_key_id = AKDEFAULT\naws_secret_access_key=default-secret\n\n"
                         "[ci] ; the farm\n  aws_access_key_id=AKCI  \naws_secret_access_key = ci-secret\n"
                         "aws_session_token = ci-token\n[broken]\naws_access_key_id = AKBROKEN\n";

  const auto from_env = find_credentials(environment_of(
      {{"AWS_ACCESS_KEY_ID", "AKENV"}, {"AWS_SECRET_ACCESS_KEY", "env-secret"}, {"AWS_SESSION_TOKEN", "env-token"},
       {"AWS_PROFILE", "ci"}, {"AWS_SHARED_CREDENTIALS_FILE", file.string()}}));
  CHECK(from_env.access_key == "AKENV");
  CHECK(from_env.secret_key == "env-secret");
  CHECK(from_env.session_token == "env-token");

  const auto shared = environment_of({{"AWS_SHARED_CREDENTIALS_FILE", file.string()}});
  CHECK(find_credentials(shared).access_key == "AKDEFAULT");
  CHECK(find_credentials(shared).secret_key == "default-secret");
  const auto ci = find_credentials(environment_of({{"AWS_SHARED_CREDENTIALS_FILE", file.string()}, {"AWS_PROFILE", "ci"}}));
  CHECK(ci.access_key == "AKCI");
  CHECK(ci.secret_key == "ci-secret");
  CHECK(ci.session_token == "ci-token");
  // A profile asked for explicitly wins over the environment's keys.
  CHECK(find_credentials(environment_of({{"AWS_ACCESS_KEY_ID", "AKENV"}, {"AWS_SECRET_ACCESS_KEY", "env-secret"},
                                         {"AWS_SHARED_CREDENTIALS_FILE", file.string()}}),
                         "ci")
            .access_key == "AKCI");
  // ~/.aws/credentials under $HOME.
  std::filesystem::create_directories(dir / "home" / ".aws");
  std::filesystem::copy_file(file, dir / "home" / ".aws" / "credentials");
  CHECK(find_credentials(environment_of({{"HOME", (dir / "home").string()}})).access_key == "AKDEFAULT");
}

TEST_CASE("Missing or malformed credentials are refused, naming where, never a secret", "[sigv4][credentials]") {
  test::TempDir dir;
  const auto file = dir / "credentials";
  std::ofstream(file) << "[default]\naws_access_key_id = AKDEFAULT\naws_secret_access_key = default-secret\n"
                         "[half]\naws_access_key_id = AKHALF\n";
  const std::string path = file.string();

  CHECK_THROWS_AS(find_credentials(environment_of({{"HOME", (dir / "nowhere").string()}})), amphora::NotFound);
  CHECK_THAT(message_of([&] { find_credentials(environment_of({{"HOME", (dir / "nowhere").string()}})); }),
             Catch::Contains("AWS_ACCESS_KEY_ID") && Catch::Contains("nowhere"));
  CHECK_THAT(message_of([&] { find_credentials(environment_of({{"AWS_ACCESS_KEY_ID", "AKONLY"}})); }),
             Catch::Contains("without AWS_SECRET_ACCESS_KEY") && !Catch::Contains("AKONLY"));
  CHECK_THAT(message_of([&] { find_credentials(environment_of({{"AWS_SECRET_ACCESS_KEY", "s3cr3t"}})); }),
             !Catch::Contains("s3cr3t"));
  CHECK_THAT(message_of([&] { find_credentials(environment_of({{"AWS_SHARED_CREDENTIALS_FILE", path}, {"AWS_PROFILE", "prod"}})); }),
             Catch::Contains("no profile 'prod' in " + path));
  const std::string half =
      message_of([&] { find_credentials(environment_of({{"AWS_SHARED_CREDENTIALS_FILE", path}}), "half"); });
  CHECK_THAT(half, Catch::Contains("has no aws_secret_access_key"));

  // Never blocked on a FIFO, never read past a size no such file has.
  const auto fifo = dir / "fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_THAT(message_of([&] { find_credentials(environment_of({{"AWS_SHARED_CREDENTIALS_FILE", fifo.string()}})); }),
             Catch::Contains("is not a regular file"));
  std::ofstream(dir / "huge") << std::string(2 << 20, '#');
  CHECK_THAT(message_of([&] { find_credentials(environment_of({{"AWS_SHARED_CREDENTIALS_FILE", (dir / "huge").string()}})); }),
             Catch::Contains("larger than 1 MiB"));

  for (const char* bad : {"aws_access_key_id = AKLOOSE\n[default]\n", "[default\naws_access_key_id = x\n",
                          "[default]\njust some words\n"}) {
    INFO(bad);
    std::ofstream(file) << bad;
    const auto broken = environment_of({{"AWS_SHARED_CREDENTIALS_FILE", path}});
    CHECK_THROWS_AS(find_credentials(broken), amphora::CorruptData);
    CHECK_THAT(message_of([&] { find_credentials(broken); }), Catch::Contains(path + " line ") && !Catch::Contains("AKLOOSE"));
  }
}
