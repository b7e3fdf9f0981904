#include "streamer/tbb_workers.h"

#include <oneapi/tbb/global_control.h>

#include <new>

namespace vramflow {

Status JoinTbbWorkerThreads() {
  oneapi::tbb::task_scheduler_handle handle{oneapi::tbb::attach{}};
  if (!oneapi::tbb::finalize(handle, std::nothrow))
    return Status::Internal("oneTBB's worker threads could not be ended: its scheduler is still in use");
  return Status::Ok();
}

}  // namespace vramflow
