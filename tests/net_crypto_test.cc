#include "transport/net_crypto.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <sys/stat.h>

#include <cstdlib>
#include <cstring>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "tests/test_util.h"

namespace vramflow {
namespace {

using testing::TempDir;

std::vector<uint8_t> Hex(const std::string& hex) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(static_cast<uint8_t>(std::stoul(hex.substr(i, 2), nullptr, 16)));
  return out;
}

std::string ToHex(std::span<const uint8_t> bytes) {
  static const char kHex[] = "0123456789abcdef";
  std::string s;
  for (uint8_t b : bytes) {
    s.push_back(kHex[b >> 4]);
    s.push_back(kHex[b & 0xf]);
  }
  return s;
}

std::span<const uint8_t> Bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

Digest ToDigest(const std::vector<uint8_t>& v) {
  Digest d{};
  std::memcpy(d.data(), v.data(), d.size());
  return d;
}

// McGrew-Viega GCM test case 16's key, plaintext and AAD (its IV does not fit
// our nonce form; the expected values below use ours).
const Digest kKey16 = ToDigest(Hex("feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308"));
const std::vector<uint8_t> kPlain16 = Hex(
    "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a721c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657"
    "ba637b39");
const std::vector<uint8_t> kAad16 = Hex("feedfacedeadbeeffeedfacedeadbeefabaddad2");

void WriteKey(const std::string& path, const std::string& contents, mode_t mode) {
  testing::WriteFileBytes(path, std::vector<uint8_t>(contents.begin(), contents.end()));
  ASSERT_EQ(::chmod(path.c_str(), mode), 0);
}

// Sets (or unsets, with nullopt) an environment variable for one test and
// puts the old value back afterwards.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) ::setenv(name, value->c_str(), 1);
    else ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_) ::setenv(name_, old_->c_str(), 1);
    else ::unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// --- HMAC-SHA256 (RFC 4231) and HKDF-SHA256 (RFC 5869) ---

TEST(NetCryptoHmac, Rfc4231TestCase1) {
  std::vector<uint8_t> key(20, 0x0b);
  Digest d = HmacSha256(key, {Bytes("Hi There")});
  EXPECT_EQ(ToHex(d), "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
}

TEST(NetCryptoHmac, Rfc4231TestCase2InParts) {
  // The parts are concatenated: any split gives the RFC's value.
  const std::string expected = "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843";
  EXPECT_EQ(ToHex(HmacSha256(Bytes("Jefe"), {Bytes("what do ya want for nothing?")})), expected);
  EXPECT_EQ(ToHex(HmacSha256(Bytes("Jefe"), {Bytes("what do ya "), Bytes(""), Bytes("want for nothing?")})), expected);
}

TEST(NetCryptoHmac, DigestsEqualComparesAllBytes) {
  Digest a = HmacSha256(Bytes("Jefe"), {Bytes("x")});
  Digest b = a;
  EXPECT_TRUE(DigestsEqual(a, b));
  b[31] ^= 1;
  EXPECT_FALSE(DigestsEqual(a, b));
  b = a;
  b[0] ^= 0x80;
  EXPECT_FALSE(DigestsEqual(a, b));
}

TEST(NetCryptoHkdf, Rfc5869TestCase1) {
  std::vector<uint8_t> ikm(22, 0x0b);
  auto salt = Hex("000102030405060708090a0b0c");
  auto info = Hex("f0f1f2f3f4f5f6f7f8f9");
  // The RFC's OKM is 42 bytes; ours is its first 32.
  EXPECT_EQ(ToHex(HkdfSha256(ikm, salt, info)), "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf");
}

TEST(NetCryptoHkdf, Rfc5869TestCase3EmptySaltAndInfo) {
  std::vector<uint8_t> ikm(22, 0x0b);
  EXPECT_EQ(ToHex(HkdfSha256(ikm, {}, {})), "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d");
}

TEST(NetCryptoHkdf, InfoSeparatesKeys) {
  std::vector<uint8_t> ikm(32, 7);
  EXPECT_NE(HkdfSha256(ikm, Bytes("salt"), Bytes("a")), HkdfSha256(ikm, Bytes("salt"), Bytes("b")));
}

// --- AES-256-GCM ---

TEST(NetCryptoAead, McGrewViegaTestCases13And14) {
  // Zero key and zero IV: our nonce for counter 0 is all zeros.
  Aead aead(Digest{});
  std::array<uint8_t, Aead::kTagBytes> tag;
  ASSERT_TRUE(aead.Seal(0, {}, {}, true, tag).ok());
  EXPECT_EQ(ToHex(tag), "530f8afbc74536b9a963b4f1c4cb738b");

  std::vector<uint8_t> data(16, 0);
  ASSERT_TRUE(aead.Seal(0, {}, data, true, tag).ok());
  EXPECT_EQ(ToHex(data), "cea7403d4d606b6e074ec5d3baf39d18");
  EXPECT_EQ(ToHex(tag), "d0d1c8a799996bf0265b98b5d48ab919");
}

TEST(NetCryptoAead, KnownAnswerWithCounterNonce) {
  // Computed independently (Python `cryptography`) with nonce 00000000 || LE64(counter).
  Aead aead(kKey16);
  std::vector<uint8_t> data = kPlain16;
  std::array<uint8_t, Aead::kTagBytes> tag;
  ASSERT_TRUE(aead.Seal(0x0102030405060708, kAad16, data, true, tag).ok());
  EXPECT_EQ(ToHex(data),
            "6f51f1713a68c7f124451f665f093bfbcbdb7256a5cfc7ba257430a019c5e573dfb825944d8976ba28a90880c7f77113291dd0d5"
            "777036a67faef0b0");
  EXPECT_EQ(ToHex(tag), "37d0e17f45866f747fae95d82e5bdf1e");

  // encrypt = false: GMAC over aad || data, data untouched.
  data = kPlain16;
  ASSERT_TRUE(aead.Seal(0x0102030405060708, kAad16, data, false, tag).ok());
  EXPECT_EQ(data, kPlain16);
  EXPECT_EQ(ToHex(tag), "4fbf92d71640a75f4818be09d607db2a");
}

TEST(NetCryptoAead, MatchesDirectEvpCall) {
  const uint64_t counter = 0xfedcba9876543210;
  uint8_t iv[12] = {0, 0, 0, 0, 0x10, 0x32, 0x54, 0x76, 0x98, 0xba, 0xdc, 0xfe};
  std::vector<uint8_t> expected(kPlain16.size());
  std::array<uint8_t, 16> expected_tag;
  EVP_CIPHER_CTX* c = EVP_CIPHER_CTX_new();
  ASSERT_NE(c, nullptr);
  int n = 0;
  ASSERT_EQ(EVP_EncryptInit_ex(c, EVP_aes_256_gcm(), nullptr, kKey16.data(), iv), 1);
  ASSERT_EQ(EVP_EncryptUpdate(c, nullptr, &n, kAad16.data(), static_cast<int>(kAad16.size())), 1);
  ASSERT_EQ(EVP_EncryptUpdate(c, expected.data(), &n, kPlain16.data(), static_cast<int>(kPlain16.size())), 1);
  ASSERT_EQ(EVP_EncryptFinal_ex(c, expected.data() + n, &n), 1);
  ASSERT_EQ(EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, 16, expected_tag.data()), 1);
  EVP_CIPHER_CTX_free(c);

  Aead aead(kKey16);
  std::vector<uint8_t> data = kPlain16;
  std::array<uint8_t, Aead::kTagBytes> tag;
  ASSERT_TRUE(aead.Seal(counter, kAad16, data, true, tag).ok());
  EXPECT_EQ(data, expected);
  EXPECT_EQ(tag, expected_tag);
}

struct RoundTripParam {
  bool encrypt;
  size_t size;
};
void PrintTo(const RoundTripParam& p, std::ostream* os) {
  *os << (p.encrypt ? "encrypt " : "authenticate only ") << p.size << " bytes";
}

class NetCryptoAeadRoundTrip : public ::testing::TestWithParam<RoundTripParam> {};

TEST_P(NetCryptoAeadRoundTrip, SealThenOpen) {
  auto [encrypt, size] = GetParam();
  std::vector<uint8_t> plain = testing::TextBytes(size);
  Aead sender(kKey16), receiver(kKey16);
  for (uint64_t counter = 0; counter < 3; ++counter) {
    std::vector<uint8_t> data = plain;
    std::array<uint8_t, Aead::kTagBytes> tag;
    ASSERT_TRUE(sender.Seal(counter, kAad16, data, encrypt, tag).ok());
    if (encrypt && size > 0) {
      EXPECT_NE(data, plain);
    } else if (!encrypt) {
      EXPECT_EQ(data, plain);
    }
    Status s = receiver.Open(counter, kAad16, data, encrypt, tag);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(data, plain);
  }
}

INSTANTIATE_TEST_SUITE_P(NetCryptoSizes, NetCryptoAeadRoundTrip,
                         ::testing::Values(RoundTripParam{true, 0}, RoundTripParam{false, 0}, RoundTripParam{true, 1},
                                           RoundTripParam{false, 1}, RoundTripParam{true, 1000},
                                           RoundTripParam{false, 1000}, RoundTripParam{true, 1 << 20},
                                           RoundTripParam{false, 1 << 20}));

TEST(NetCryptoAead, SameObjectSealsAndOpens) {
  Aead aead(kKey16);
  std::vector<uint8_t> data = kPlain16;
  std::array<uint8_t, Aead::kTagBytes> tag;
  ASSERT_TRUE(aead.Seal(5, kAad16, data, true, tag).ok());
  ASSERT_TRUE(aead.Open(5, kAad16, data, true, tag).ok());
  EXPECT_EQ(data, kPlain16);
  ASSERT_TRUE(aead.Seal(6, kAad16, data, true, tag).ok());
  ASSERT_TRUE(aead.Open(6, kAad16, data, true, tag).ok());
  EXPECT_EQ(data, kPlain16);
}

// Every single-bit flip in aad, data or tag must be caught, in both modes.
TEST(NetCryptoAead, AnyBitFlipIsCorruption) {
  for (bool encrypt : {true, false}) {
    Aead sender(kKey16), receiver(kKey16);
    std::vector<uint8_t> sealed = kPlain16;
    std::array<uint8_t, Aead::kTagBytes> tag;
    ASSERT_TRUE(sender.Seal(9, kAad16, sealed, encrypt, tag).ok());
    auto expect_rejected = [&](std::vector<uint8_t> aad, std::vector<uint8_t> data,
                               std::array<uint8_t, Aead::kTagBytes> t, const std::string& what) {
      Status s = receiver.Open(9, aad, data, encrypt, t);
      EXPECT_EQ(s.code(), Status::Code::kCorruption) << what << " encrypt=" << encrypt;
    };
    for (size_t bit = 0; bit < kAad16.size() * 8; ++bit) {
      auto aad = kAad16;
      aad[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
      expect_rejected(aad, sealed, tag, "aad bit " + std::to_string(bit));
    }
    for (size_t bit = 0; bit < sealed.size() * 8; ++bit) {
      auto data = sealed;
      data[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
      expect_rejected(kAad16, data, tag, "data bit " + std::to_string(bit));
    }
    for (size_t bit = 0; bit < tag.size() * 8; ++bit) {
      auto t = tag;
      t[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
      expect_rejected(kAad16, sealed, t, "tag bit " + std::to_string(bit));
    }
    // Failures leave the receiver usable: the untouched message still opens.
    std::vector<uint8_t> data = sealed;
    ASSERT_TRUE(receiver.Open(9, kAad16, data, encrypt, tag).ok());
    EXPECT_EQ(data, kPlain16);
  }
}

TEST(NetCryptoAead, WrongCounterIsCorruption) {
  Aead sender(kKey16), receiver(kKey16);
  std::vector<uint8_t> data = kPlain16;
  std::array<uint8_t, Aead::kTagBytes> tag;
  ASSERT_TRUE(sender.Seal(1, kAad16, data, true, tag).ok());
  for (uint64_t wrong : {uint64_t{0}, uint64_t{2}, uint64_t{1} << 32, ~uint64_t{0}}) {
    std::vector<uint8_t> copy = data;
    Status s = receiver.Open(wrong, kAad16, copy, true, tag);
    EXPECT_EQ(s.code(), Status::Code::kCorruption) << wrong;
    EXPECT_EQ(s.message(), "message failed authentication (wrong key, tampered or replayed)");
    EXPECT_NE(copy, kPlain16);  // no unauthenticated plaintext handed out
  }
}

TEST(NetCryptoAead, WrongKeyIsCorruption) {
  Digest other = kKey16;
  other[31] ^= 1;
  Aead sender(kKey16), receiver(other);
  for (bool encrypt : {true, false}) {
    std::vector<uint8_t> data = kPlain16;
    std::array<uint8_t, Aead::kTagBytes> tag;
    ASSERT_TRUE(sender.Seal(0, kAad16, data, encrypt, tag).ok());
    EXPECT_EQ(receiver.Open(0, kAad16, data, encrypt, tag).code(), Status::Code::kCorruption);
  }
}

TEST(NetCryptoAead, EmptyDataAndAadStillAuthenticated) {
  Aead sender(kKey16), receiver(kKey16);
  std::array<uint8_t, Aead::kTagBytes> tag;
  ASSERT_TRUE(sender.Seal(3, {}, {}, true, tag).ok());
  EXPECT_TRUE(receiver.Open(3, {}, {}, true, tag).ok());
  EXPECT_EQ(receiver.Open(4, {}, {}, true, tag).code(), Status::Code::kCorruption);
  tag[0] ^= 1;
  EXPECT_EQ(receiver.Open(3, {}, {}, true, tag).code(), Status::Code::kCorruption);
}

// --- Keys ---

const std::string kGoodKey = "0123456789abcdef0123456789abcdef";

TEST(NetCryptoKey, LoadsGoodFileAndStripsTrailingWhitespace) {
  TempDir dir;
  WriteKey(dir.File("k"), kGoodKey + " \t\r\n\n", 0600);
  auto key = LoadKeyFile(dir.File("k"));
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  EXPECT_EQ(std::string(key->secret.begin(), key->secret.end()), kGoodKey);
  EXPECT_EQ(key->origin, "key file '" + dir.File("k") + "'");
}

TEST(NetCryptoKey, KeepsLeadingAndInnerBytes) {
  TempDir dir;
  WriteKey(dir.File("k"), " abc def ghi jkl mno\n", 0400);
  auto key = LoadKeyFile(dir.File("k"));
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  EXPECT_EQ(std::string(key->secret.begin(), key->secret.end()), " abc def ghi jkl mno");
}

TEST(NetCryptoKey, RefusesFileOthersCanRead) {
  TempDir dir;
  for (mode_t mode : {0644, 0640, 0604, 0602, 0620}) {
    WriteKey(dir.File("k"), kGoodKey, mode);
    auto key = LoadKeyFile(dir.File("k"));
    ASSERT_FALSE(key.ok()) << std::oct << mode;
    EXPECT_EQ(key.status().code(), Status::Code::kInvalidArgument);
    EXPECT_NE(key.status().message().find("chmod 600"), std::string::npos) << key.status().message();
    EXPECT_NE(key.status().message().find(dir.File("k")), std::string::npos) << key.status().message();
  }
}

TEST(NetCryptoKey, RefusesShortFile) {
  TempDir dir;
  // 15 bytes once the newline is stripped.
  WriteKey(dir.File("k"), kGoodKey.substr(0, kMinKeyBytes - 1) + "\n", 0600);
  auto key = LoadKeyFile(dir.File("k"));
  ASSERT_FALSE(key.ok());
  EXPECT_EQ(key.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(key.status().message().find(dir.File("k")), std::string::npos) << key.status().message();
  EXPECT_NE(key.status().message().find("15"), std::string::npos) << key.status().message();

  WriteKey(dir.File("k"), kGoodKey.substr(0, kMinKeyBytes), 0600);
  EXPECT_TRUE(LoadKeyFile(dir.File("k")).ok());
}

TEST(NetCryptoKey, MissingFileIsIoError) {
  TempDir dir;
  auto key = LoadKeyFile(dir.File("absent"));
  ASSERT_FALSE(key.ok());
  EXPECT_EQ(key.status().code(), Status::Code::kIoError);
  EXPECT_NE(key.status().message().find(dir.File("absent")), std::string::npos) << key.status().message();
}

TEST(NetCryptoKey, ResolveKeyPrecedence) {
  TempDir dir;
  WriteKey(dir.File("flag"), "flag-key-0123456789", 0600);
  WriteKey(dir.File("env"), "env-file-key-0123456789\n", 0600);

  {
    ScopedEnv f("VRAMFLOW_KEY_FILE", std::nullopt), k("VRAMFLOW_KEY", std::nullopt);
    auto none = ResolveKey("");
    ASSERT_TRUE(none.ok());
    EXPECT_FALSE(none->has_value());
  }
  {
    ScopedEnv f("VRAMFLOW_KEY_FILE", dir.File("env")), k("VRAMFLOW_KEY", "env-secret-0123456789\n");
    // The flag wins over both variables.
    auto key = ResolveKey(dir.File("flag"));
    ASSERT_TRUE(key.ok() && key->has_value()) << key.status().ToString();
    EXPECT_EQ(std::string((*key)->secret.begin(), (*key)->secret.end()), "flag-key-0123456789");
    EXPECT_EQ((*key)->origin, "key file '" + dir.File("flag") + "'");
    // Then $VRAMFLOW_KEY_FILE over $VRAMFLOW_KEY.
    key = ResolveKey("");
    ASSERT_TRUE(key.ok() && key->has_value()) << key.status().ToString();
    EXPECT_EQ(std::string((*key)->secret.begin(), (*key)->secret.end()), "env-file-key-0123456789");
    EXPECT_EQ((*key)->origin, "key file '" + dir.File("env") + "'");
  }
  {
    ScopedEnv f("VRAMFLOW_KEY_FILE", ""), k("VRAMFLOW_KEY", "env-secret-0123456789 \n");
    auto key = ResolveKey("");
    ASSERT_TRUE(key.ok() && key->has_value()) << key.status().ToString();
    EXPECT_EQ(std::string((*key)->secret.begin(), (*key)->secret.end()), "env-secret-0123456789");
    EXPECT_EQ((*key)->origin, "VRAMFLOW_KEY");
  }
  {
    ScopedEnv f("VRAMFLOW_KEY_FILE", std::nullopt), k("VRAMFLOW_KEY", "short\n");
    auto key = ResolveKey("");
    ASSERT_FALSE(key.ok());
    EXPECT_EQ(key.status().code(), Status::Code::kInvalidArgument);
    EXPECT_NE(key.status().message().find("VRAMFLOW_KEY"), std::string::npos);
  }
  {
    // A bad file named by the variable is an error, not a fall-through.
    ScopedEnv f("VRAMFLOW_KEY_FILE", dir.File("absent")), k("VRAMFLOW_KEY", "env-secret-0123456789");
    EXPECT_FALSE(ResolveKey("").ok());
  }
}

TEST(NetCryptoKey, GenerateKeyTextIs64LowercaseHexAndRandom) {
  auto a = GenerateKeyText();
  auto b = GenerateKeyText();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->size(), 64u);
  EXPECT_EQ(a->find_first_not_of("0123456789abcdef"), std::string::npos) << *a;
  EXPECT_NE(*a, *b);

  // Usable as a key file as written.
  TempDir dir;
  WriteKey(dir.File("k"), *a, 0600);
  auto key = LoadKeyFile(dir.File("k"));
  ASSERT_TRUE(key.ok());
  EXPECT_EQ(key->secret.size(), 64u);
}

TEST(NetCryptoKey, RandomBytesFillsBuffer) {
  std::vector<uint8_t> a(64, 0), b(64, 0);
  ASSERT_TRUE(RandomBytes(a).ok());
  ASSERT_TRUE(RandomBytes(b).ok());
  EXPECT_NE(a, b);
  EXPECT_NE(a, std::vector<uint8_t>(64, 0));
  EXPECT_TRUE(RandomBytes({}).ok());
}

}  // namespace
}  // namespace vramflow
