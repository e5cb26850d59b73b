#include "master/state_view_cache.h"

#include <algorithm>
#include <map>

#include "base/log.h"

namespace allot {

using SteadyClock = std::chrono::steady_clock;

// A rendered (or rendering) /state: pieces in order, immutable once added.
class StateDocument {
 public:
  StateDocument(std::shared_ptr<size_t> alive, uint64_t epoch)
      : alive_(std::move(alive)), epoch(epoch), started(SteadyClock::now()) {
    ++*alive_;
  }
  ~StateDocument() { --*alive_; }
  StateDocument(const StateDocument&) = delete;
  StateDocument& operator=(const StateDocument&) = delete;

  void append(http::Piece piece) {
    pieces.push_back(std::move(piece));
    wake();
  }
  void finish() {
    complete = true;
    finished = SteadyClock::now();
    wake();
  }
  // Readers whose pull waits for the next piece.
  void wake();

  std::shared_ptr<size_t> alive_;
  const uint64_t epoch;
  const SteadyClock::time_point started;
  SteadyClock::time_point finished;
  std::vector<http::Piece> pieces;
  bool complete = false;
  std::vector<std::weak_ptr<StateReader>> waiting;
};

// The loop's side of one rendering: runs the view's slices (one per loop
// turn, each within kSliceBudget), hands batches to the worker, appends
// the pieces in order.
class StateRendering : public std::enable_shared_from_this<StateRendering> {
 public:
  StateRendering(asio::io_context& io, WorkerPool& pool, const StateCacheOptions& options,
                 std::unique_ptr<MasterStateView> view, std::shared_ptr<StateDocument> document,
                 std::function<void()> onDone)
      : io_(io), pool_(pool), options_(options), view_(std::move(view)), document_(std::move(document)),
        onDone_(std::move(onDone)) {}

  void start() {
    document_->append(std::make_shared<const std::string>(view_->header()));
    schedule();
  }
  // Nothing runs afterwards (the Master may be going away).
  void abandon() {
    view_.reset();
    onDone_ = nullptr;
  }
  const std::shared_ptr<StateDocument>& document() const { return document_; }

 private:
  void schedule() {
    if (scheduled_ || !view_ || view_->done() || inFlight_ >= StateCache::kBatchesInFlight) return;
    scheduled_ = true;
    asio::post(io_, [weak = weak_from_this()] {
      if (auto self = weak.lock()) self->runSlice();
    });
  }
  void runSlice() {
    scheduled_ = false;
    if (!view_) return;
    // Timed only while the view lives: the sections' owner outlives it.
    LoopSections::Timer timed(options_.sections, options_.sliceSection);
    // As many batches as the slice's budget and the worker's queue allow:
    // every loop turn a rendering waits for adds to its latency.
    MasterStateView::Slice slice;
    slice.deadline = SteadyClock::now() + StateCache::kSliceBudget;
    while (view_ && !view_->done() && inFlight_ < StateCache::kBatchesInFlight &&
           SteadyClock::now() < slice.deadline) {
      auto batch = view_->step(slice);
      if (!batch) break;  // the budget ran out mid-batch
      submit(std::move(batch));
    }
    schedule();
  }
  void submit(std::unique_ptr<StateBatch> owned) {
    std::shared_ptr<const StateBatch> batch(std::move(owned));
    uint64_t seq = nextSeq_++;
    ++inFlight_;
    // The batch is freed with the job, on the worker.
    Status st = pool_.submit<http::Piece>(
        [batch] { return std::make_shared<const std::string>(batch->render()); },
        [weak = weak_from_this(), seq](http::Piece piece) {
          if (auto self = weak.lock()) self->onPiece(seq, std::move(piece));
        });
    if (!st) {
      // kBatchesInFlight keeps the queue below its limit; should it be
      // full, the loop renders the batch itself rather than lose it.
      LOG_WARNING("/state: " << st.error().describe() << "; rendering a batch on the loop");
      onPiece(seq, std::make_shared<const std::string>(batch->render()));
    }
  }
  void onPiece(uint64_t seq, http::Piece piece) {
    --inFlight_;
    if (!view_) return;
    LoopSections::Timer timed(options_.sections, options_.piecesSection);
    early_[seq] = std::move(piece);
    for (auto it = early_.begin(); it != early_.end() && it->first == nextAppend_;
         it = early_.erase(it)) {
      document_->append(std::move(it->second));
      ++nextAppend_;
    }
    if (view_->done() && inFlight_ == 0) {
      document_->finish();
      view_.reset();
      if (auto done = std::move(onDone_)) done();
      return;
    }
    schedule();
  }

  asio::io_context& io_;
  WorkerPool& pool_;
  const StateCacheOptions options_;
  std::unique_ptr<MasterStateView> view_;
  std::shared_ptr<StateDocument> document_;
  std::function<void()> onDone_;
  bool scheduled_ = false;
  size_t inFlight_ = 0;
  uint64_t nextSeq_ = 0;
  uint64_t nextAppend_ = 0;
  std::map<uint64_t, http::Piece> early_;  // pieces back before an earlier one
};

struct StateCache::Core : public std::enable_shared_from_this<StateCache::Core> {
  Core(asio::io_context& io, ViewFactory makeView, StateCacheOptions options)
      : io(io), makeView(std::move(makeView)), options(options),
        pool(io, WorkerPoolOptions{.threads = 1,
                                   .queueMax = kBatchesInFlight + 1,
                                   .idlePolicy = true,
                                   .name = "allot-state"}) {}

  bool servable(const StateDocument& d) const {
    if (d.epoch != epoch || !d.complete) return false;
    auto window = std::min<SteadyClock::duration>(d.finished - d.started, options.maxAge);
    return SteadyClock::now() - d.finished < window;
  }

  std::shared_ptr<StateReader> open() {
    if (stopped || readers >= options.clientsMax) return nullptr;
    std::shared_ptr<StateReader> reader(new StateReader);
    reader->core_ = weak_from_this();
    ++readers;
    if (current && servable(*current)) {
      reader->document_ = current;
    } else if (rendering && rendering->document()->epoch == epoch) {
      reader->document_ = rendering->document();
    } else {
      waiting.push_back(reader);
      maybeStart();
    }
    return reader;
  }

  // Starts the next rendering for the waiting readers, within
  // kDocumentsMax (an unread stale document makes room).
  void maybeStart() {
    if (stopped || waiting.empty() || rendering) return;
    if (current && current.use_count() == 1 && !servable(*current)) current.reset();
    if (*documents + 1 > kDocumentsMax) return;  // a reader's release calls again
    ++started;
    auto document = std::make_shared<StateDocument>(documents, epoch);
    rendering = std::make_shared<StateRendering>(io, pool, options, makeView(), document,
                                                 [this] { renderingDone(); });
    auto attach = std::move(waiting);
    waiting.clear();
    for (auto& weak : attach) {
      if (auto r = weak.lock()) {
        r->document_ = document;
        if (r->pending_) r->pull(std::move(r->pending_));
      }
    }
    rendering->start();
  }

  void renderingDone() {
    current = rendering->document();
    // The rendering object is released from its own callback: later.
    asio::post(io, [keep = std::move(rendering)] {});
    maybeStart();
  }

  void stop() {
    stopped = true;
    auto dropPending = [](const std::vector<std::weak_ptr<StateReader>>& readers) {
      for (auto& weak : readers) {
        if (auto r = weak.lock()) r->pending_ = nullptr;
      }
    };
    dropPending(waiting);
    if (rendering) {
      dropPending(rendering->document()->waiting);
      rendering->abandon();
    }
    if (current) dropPending(current->waiting);
    waiting.clear();
    rendering.reset();
    current.reset();
  }

  asio::io_context& io;
  ViewFactory makeView;
  StateCacheOptions options;
  WorkerPool pool;
  std::shared_ptr<size_t> documents = std::make_shared<size_t>(0);
  size_t readers = 0;
  uint64_t epoch = 0;
  uint64_t started = 0;
  bool stopped = false;
  std::shared_ptr<StateDocument> current;
  std::shared_ptr<StateRendering> rendering;
  std::vector<std::weak_ptr<StateReader>> waiting;  // for the next rendering
};

void StateDocument::wake() {
  auto readers = std::move(waiting);
  waiting.clear();
  for (auto& weak : readers) {
    if (auto r = weak.lock(); r && r->pending_) r->pull(std::move(r->pending_));
  }
}

StateReader::~StateReader() {
  auto core = core_.lock();
  if (!core) return;
  --core->readers;
  // A document this reader held may have been all that kept a rendering
  // from starting.
  asio::post(core->io, [weak = core_] {
    if (auto c = weak.lock()) c->maybeStart();
  });
}

void StateReader::pull(http::PieceSink sink) {
  pending_ = nullptr;
  if (!document_) {
    pending_ = std::move(sink);  // the next rendering attaches it
    return;
  }
  StateDocument& d = *document_;
  if (next_ < d.pieces.size()) {
    http::Piece piece = d.pieces[next_++];
    bool more = !(d.complete && next_ == d.pieces.size());
    return sink(std::move(piece), more);
  }
  if (d.complete) return sink(nullptr, false);
  pending_ = std::move(sink);
  d.waiting.push_back(shared_from_this());
}

StateCache::StateCache(asio::io_context& io, ViewFactory makeView, StateCacheOptions options)
    : core_(std::make_shared<Core>(io, std::move(makeView), options)) {}

StateCache::~StateCache() { core_->stop(); }

std::shared_ptr<StateReader> StateCache::open() { return core_->open(); }
void StateCache::invalidate() { ++core_->epoch; }
void StateCache::stop() { core_->stop(); }
uint64_t StateCache::renderingsStarted() const { return core_->started; }
size_t StateCache::documentsAlive() const { return *core_->documents; }
size_t StateCache::readersOpen() const { return core_->readers; }

}  // namespace allot
