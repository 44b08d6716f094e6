// train_state_from_json (lib/train/train_state.h): the "trainer.state" JSON of a checkpoint, as
// --resume reads it. Input: the JSON text. Bad input must be a DataError; a state that is read
// must hold only what a run can write (counts >= 0, batch size >= 1), and writing it out and
// reading it back must give the same state.
#include <cstdlib>

#include "lib/train/train_state.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trainer;
  const nlohmann::json j = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;  // not JSON: checkpointing.cc says so before this reader
  TrainState s;
  try {
    s = train_state_from_json(j, "fuzz.state.safetensors");
  } catch (const InternalError&) {
    throw;
  } catch (const Error&) {
    return 0;
  }
  if (s.epochs_done < 0 || s.batches_done < 0 || s.step < 0 || s.batch_size < 1 || s.train_samples < 1 ||
      s.skipped_batches < 0 || s.partial.samples < 0 || !(s.seconds >= 0))
    std::abort();  // a state no run writes was accepted
  const TrainState again = train_state_from_json(train_state_json(s), "round trip");
  if (again.epochs_done != s.epochs_done || again.batches_done != s.batches_done || again.step != s.step ||
      again.optimizer != s.optimizer || again.seed != s.seed || again.batch_size != s.batch_size ||
      again.checkpoint_id != s.checkpoint_id)
    std::abort();
  return 0;
}
