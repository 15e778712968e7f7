#include "parallel/unconnected_communicator.h"

#include <stdexcept>

namespace brt::parallel {

UnconnectedCommunicator::UnconnectedCommunicator(const std::string& name, int rank, int size)
    : name_(name + "[unconnected " + std::to_string(size) + "]"), rank_(rank), size_(size) {
  if (size < 1 || rank < 0 || rank >= size)
    throw std::invalid_argument("UnconnectedCommunicator " + name + ": rank " + std::to_string(rank) +
                                " of size " + std::to_string(size));
}

void UnconnectedCommunicator::refuse(const char* op) const {
  throw std::logic_error(std::string(op) + " on group " + name_ +
                         ": it has no peers (it only lays a model out to count its memory)");
}

Request UnconnectedCommunicator::start_all_reduce(const void*, void*, int64_t, DataType, ReduceOp, Stream) {
  refuse("all_reduce");
}
Request UnconnectedCommunicator::start_reduce_scatter(const void*, void*, int64_t, DataType, ReduceOp,
                                                      Stream) {
  refuse("reduce_scatter");
}
Request UnconnectedCommunicator::start_all_gather(const void*, void*, int64_t, DataType, Stream) {
  refuse("all_gather");
}
Request UnconnectedCommunicator::start_broadcast(void*, int64_t, DataType, int, Stream) { refuse("broadcast"); }
Request UnconnectedCommunicator::start_barrier(Stream) { refuse("barrier"); }
Request UnconnectedCommunicator::start_shift(const void*, void*, int64_t, DataType, int, Stream) {
  refuse("shift");
}

}  // namespace brt::parallel
