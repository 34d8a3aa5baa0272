// Making work items' inputs. On GPU lanes the next items' inputs are made on a host thread
// while the lanes time other work (the GPU does the timed part; the host would otherwise idle).
#pragma once

#include <cstddef>
#include <filesystem>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "plan.h"
#include "prepare.h"

namespace fib::bench::detail {

// A work item's inputs, made by prepare_workload() (or why they could not be).
struct PreparedItem {
  std::optional<PreparedWorkload> workload;
  std::string error;
  double seconds = 0;  // host time spent making them
};

class InputMaker {
 public:
  // Each item's inputs go to a folder of their own under `scratch`. `ahead`: prepare_ahead
  // starts making inputs (otherwise it does nothing).
  InputMaker(PrepareSettings settings, std::filesystem::path scratch,
             const std::vector<WorkItem>& items, bool ahead);
  ~InputMaker();  // waits for inputs still in the making (their files go with the scratch)
  InputMaker(const InputMaker&) = delete;
  InputMaker& operator=(const InputMaker&) = delete;

  // Starts making item k's inputs on a host thread, unless they are made or in the making.
  void prepare_ahead(std::size_t k);

  struct Taken {
    PreparedItem item;
    bool was_ready = false;  // made ahead and finished before they were asked for
  };
  // Item k's inputs: those made ahead (waiting for them), or made now with every core.
  Taken take(std::size_t k);

  // Item k's inputs are not needed (its solutions answered without them): those made ahead go.
  void discard(std::size_t k);

  void wait_all();  // for inputs still in the making

 private:
  PreparedItem make(std::size_t k, int max_threads);

  const PrepareSettings settings_;
  const std::filesystem::path scratch_;
  const std::vector<WorkItem>& items_;
  const bool ahead_enabled_;
  std::mutex mu_;
  std::map<std::size_t, std::future<PreparedItem>> ahead_;  // item index -> inputs in the making
  std::shared_future<void> ahead_last_;  // the item made ahead last: the next one waits for it
  std::size_t workload_index_ = 0;       // names the items' folders
};

}  // namespace fib::bench::detail
