// parallel/unconnected_communicator.h: a group's size and rank with no peers. A model lays
// itself out on it as that rank; any collective throws, naming the group and the operation.
#include <gtest/gtest.h>

#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "parallel/unconnected_communicator.h"

namespace bp = brt::parallel;

TEST(UnconnectedCommunicator, HasASizeAndRankAndNoPeers) {
  bp::UnconnectedCommunicator tp("tp", 1, 4);
  EXPECT_EQ(tp.rank(), 1);
  EXPECT_EQ(tp.size(), 4);
  EXPECT_EQ(tp.name(), "tp[unconnected 4]");
  std::vector<float> x(8, 1.0f);
  try {
    tp.all_reduce(std::span<float>(x));
    FAIL() << "expected std::logic_error";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("all_reduce on group tp[unconnected 4]: it has no peers"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(tp.barrier(), std::logic_error);
  EXPECT_THROW(tp.broadcast(std::span<float>(x), 0), std::logic_error);
  EXPECT_EQ(x, std::vector<float>(8, 1.0f)) << "a refused collective leaves the buffer alone";
}

TEST(UnconnectedCommunicator, RefusesARankOutsideItsSize) {
  EXPECT_THROW(bp::UnconnectedCommunicator("cp", 2, 2), std::invalid_argument);
  EXPECT_THROW(bp::UnconnectedCommunicator("cp", 0, 0), std::invalid_argument);
}
