// Reproduces WriterPool exhaustion: more clients than pooled writers.
#include "writer_pool.h"
#include <gtest/gtest.h>
#include <thread>
#include <vector>

TEST(WriterPoolRepro, ExhaustionWithSeventyClients) {
  WriterPool pool(64);
  std::vector<std::thread> clients;
  for (int i = 0; i < 70; ++i) {
    clients.emplace_back([&pool] { auto w = pool.acquire(); ASSERT_NE(w, nullptr); });
  }
  for (auto& c : clients) c.join();
}
