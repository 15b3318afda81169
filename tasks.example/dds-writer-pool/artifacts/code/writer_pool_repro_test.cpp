// Test 1 of artifacts/design/test-strategy.md: reproduce WriterPool exhaustion.
// 70 clients hold a writer at the same time against the default pool of 64.
// On the current code acquire() returns null for 6 of them (the null that
// ClientSession::open() dereferences in production), so this test fails until
// the pool is fixed.
#include "qos_config.h"
#include "writer_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <thread>
#include <utility>
#include <vector>

namespace {

constexpr int kClients = 70;  // more than the default max_writers

TEST(WriterPoolRepro, SeventyConcurrentClientsAllGetAWriter) {
  const QosConfig qos = QosConfig::defaults();
  ASSERT_EQ(qos.max_writers, 64) << "the test assumes the default pool size";
  WriterPool pool(qos.max_writers);

  std::atomic<int> null_writers{0};
  std::barrier all_acquired(kClients);  // nobody releases before everyone has acquired
  std::vector<std::thread> clients;
  clients.reserve(kClients);
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([&] {
      auto writer = pool.acquire();
      if (writer == nullptr) null_writers.fetch_add(1);
      all_acquired.arrive_and_wait();
      if (writer != nullptr) pool.release(std::move(writer));
    });
  }
  for (auto& c : clients) c.join();

  EXPECT_EQ(null_writers.load(), 0) << "clients left without a writer: the pool is exhausted";
  EXPECT_EQ(pool.available(), qos.max_writers) << "every writer is back in the pool";
}

}  // namespace
