// TransportSecurity between a real server and real clients on 127.0.0.1, with
// certificates made by deploy/make-certs.sh: who gets through, and what the refused hear.
#include "wire/security/transport_security.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "wire/security/peer_identity.h"

namespace ringsync {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;
namespace health = grpc::health::v1;

// A health service that remembers who called.
class RecordingHealth final : public health::Health::Service {
 public:
  grpc::Status Check(grpc::ServerContext* context, const health::HealthCheckRequest*,
                     health::HealthCheckResponse* response) override {
    absl::MutexLock lock(&mu_);
    last_ = IdentityOf(context->auth_context().get());
    response->set_status(health::HealthCheckResponse::SERVING);
    return grpc::Status::OK;
  }
  PeerIdentity last() {
    absl::MutexLock lock(&mu_);
    return last_;
  }

 private:
  absl::Mutex mu_;
  PeerIdentity last_;
};

class TransportSecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/ringsync-tls-test-XXXXXX";
    dir_ = ::mkdtemp(pattern);
    MakeCerts("ca", "coordinator worker/w0 worker/w1");
    MakeCerts("other-ca", "worker/w0");
    std::ofstream(dir_ + "/token") << "s3cret\n";
    std::ofstream(dir_ + "/wrong-token") << "guess\n";
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
    fs::remove_all(dir_);
  }

  void MakeCerts(const std::string& sub, const std::string& names) {
    const std::string command =
        absl::StrCat(RINGSYNC_MAKE_CERTS, " ", dir_, "/", sub, " ", names, " >/dev/null");
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
  }

  TransportSecurityOptions Tls(const std::string& sub, const std::string& name) const {
    TransportSecurityOptions options;
    options.tls_ca = absl::StrCat(dir_, "/", sub, "/ca.pem");
    options.tls_cert = absl::StrCat(dir_, "/", sub, "/", name, ".pem");
    options.tls_key = absl::StrCat(dir_, "/", sub, "/", name, ".key");
    options.tls_reload_interval = absl::Seconds(1);
    return options;
  }
  TransportSecurityOptions Token(const std::string& file) const {
    TransportSecurityOptions options;
    options.token_file = dir_ + "/" + file;
    return options;
  }

  void Serve(const TransportSecurityOptions& options) {
    absl::StatusOr<TransportSecurity> security = TransportSecurity::Create(options);
    ASSERT_TRUE(security.ok()) << security.status();
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0",
                             security->ServerCredentials([this](absl::string_view reason,
                                                                absl::string_view detail) {
                               absl::MutexLock lock(&mu_);
                               refusals_.push_back(absl::StrCat(reason, ": ", detail));
                             }),
                             &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
  }

  grpc::Status Call(const TransportSecurityOptions& options) {
    absl::StatusOr<TransportSecurity> security = TransportSecurity::Create(options);
    EXPECT_TRUE(security.ok()) << security.status();
    auto stub = health::Health::NewStub(
        security->CreateChannel(absl::StrCat("127.0.0.1:", port_), grpc::ChannelArguments()));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    health::HealthCheckResponse response;
    return stub->Check(&context, health::HealthCheckRequest(), &response);
  }

  std::vector<std::string> refusals() {
    absl::MutexLock lock(&mu_);
    return refusals_;
  }

  std::string dir_;
  RecordingHealth service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  absl::Mutex mu_;
  std::vector<std::string> refusals_;
};

TEST_F(TransportSecurityTest, TokenServerAcceptsTheTokenAndRefusesNoneOrAWrongOne) {
  Serve(Token("token"));
  EXPECT_TRUE(Call(Token("token")).ok());
  const grpc::Status none = Call(TransportSecurityOptions());
  EXPECT_EQ(none.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(none.error_message(), HasSubstr("requires the cluster token and the call carried none"));
  const grpc::Status wrong = Call(Token("wrong-token"));
  EXPECT_EQ(wrong.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(wrong.error_message(), HasSubstr("cluster token is wrong"));
  EXPECT_THAT(refusals(), ::testing::ElementsAre(
                              HasSubstr("no_cluster_token: a call to /grpc.health.v1.Health/Check"),
                              HasSubstr("wrong_cluster_token")));
}

TEST_F(TransportSecurityTest, MutualTlsNamesTheClientsCertificate) {
  Serve(Tls("ca", "coordinator"));
  ASSERT_TRUE(Call(Tls("ca", "worker-w0")).ok());
  const PeerIdentity peer = service_.last();
  EXPECT_TRUE(peer.authenticated);
  EXPECT_TRUE(peer.IsWorker("w0"));
  EXPECT_FALSE(peer.IsWorker("w1"));
  EXPECT_TRUE(CheckClaimedWorker(peer, "w0", true).ok());
  EXPECT_THAT(CheckClaimedWorker(peer, "w1", true).message(),
              HasSubstr("claims to be worker 'w1' but presented a certificate for "
                        "ringsync://worker/w0"));
}

TEST_F(TransportSecurityTest, MutualTlsRefusesAClientWithoutACertificateOrFromAnotherCa) {
  Serve(Tls("ca", "coordinator"));
  EXPECT_EQ(Call(TransportSecurityOptions()).error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(Call(Tls("other-ca", "worker-w0")).error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(TransportSecurityTest, TlsAndTokenTogetherNeedBoth) {
  TransportSecurityOptions both = Tls("ca", "coordinator");
  both.token_file = dir_ + "/token";
  Serve(both);
  TransportSecurityOptions client = Tls("ca", "worker-w0");
  EXPECT_EQ(Call(client).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  client.token_file = dir_ + "/token";
  EXPECT_TRUE(Call(client).ok());
  EXPECT_THAT(refusals(), ::testing::ElementsAre(HasSubstr("from ringsync://worker/w0")));
}

TEST_F(TransportSecurityTest, CertificatesReplacedOnDiskTakeEffectWithoutARestart) {
  Serve(Tls("ca", "coordinator"));
  ASSERT_TRUE(Call(Tls("ca", "worker-w0")).ok());
  // The operator moves the cluster to a new CA: the server's files are replaced in place.
  MakeCerts("new-ca", "coordinator worker/w0");
  for (const char* file : {"ca.pem", "coordinator.key", "coordinator.pem"}) {
    fs::copy_file(dir_ + "/new-ca/" + file, dir_ + "/ca/" + file,
                  fs::copy_options::overwrite_existing);
  }
  grpc::Status status;
  for (int i = 0; i < 50; ++i) {  // the server reads its files every second
    status = Call(Tls("new-ca", "worker-w0"));
    if (status.ok()) break;
    absl::SleepFor(absl::Milliseconds(200));
  }
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(Call(Tls("other-ca", "worker-w0")).error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST(TransportSecurityOptionsTest, TlsFilesGoTogetherAndMustBePem) {
  TransportSecurityOptions options;
  options.tls_ca = "/etc/hostname";
  EXPECT_THAT(TransportSecurity::Create(options).status().message(),
              HasSubstr("--tls_ca, --tls_cert and --tls_key go together"));
  options.tls_cert = "/etc/hostname";
  options.tls_key = "/etc/hostname";
  EXPECT_THAT(TransportSecurity::Create(options).status().message(),
              HasSubstr("--tls_ca=/etc/hostname: not a PEM file"));
  options.name_prefix = "";
  options.tls_key = "";
  EXPECT_THAT(TransportSecurity::Create(options).status().message(), HasSubstr("missing: tls_key"));
}

TEST(TransportSecurityOptionsTest, NoOptionsIsPlainTcp) {
  const TransportSecurity security = TransportSecurity::Create(TransportSecurityOptions()).value();
  EXPECT_TRUE(security.insecure());
  EXPECT_EQ(security.Describe(), "no authentication");
}

}  // namespace
}  // namespace ringsync
