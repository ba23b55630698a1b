package vaultstore

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/tokenvault/tokenvault/vaultstore/kv"
)

// maxAuditBatch bounds the records one batch transaction writes.
const maxAuditBatch = 256

// errStoreClosed answers audit writes that arrive while the store closes.
var errStoreClosed = errors.New("the store is closing")

// auditBatcher writes the audit records of reads and detokenizations,
// with the activity markers of the tokens they used, in shared
// transactions: one goroutine takes every record waiting, writes them in
// one transaction, waits until it is committed as the audit tier says
// (audit_durability.go: in the engine's log, where a crash of the process
// cannot lose it, with a sync within a few milliseconds; or, strict,
// synced with group commit as every write is), and only then answers
// each caller. While a batch commits, the next one gathers, so a busy
// vault writes many records per transaction and per sync instead of one.
//
// Nothing changes for the caller: its record is committed before it gets
// an answer, and if the batch fails every caller in it gets the error, so
// no read returns data its record does not cover (fail closed).
//
// A read announces itself (expect) before it reads, and while announced
// reads have not yet queued their records a batch lingers for them (at
// most linger), as the Badger engine's group sync does for running transactions.
// auditLinger bounds how long an audit batch waits for reads already under
// way to join it. It matches the Badger engine's sync linger: each batch
// costs one commit and one sync whatever it covers, so under load fewer,
// fuller batches leave more CPU to requests, while a lone read never waits.
const auditLinger = 500 * time.Microsecond

type auditBatcher struct {
	kv       KV
	reqs     chan *auditWrite
	stop     <-chan struct{}
	linger   time.Duration
	expected atomic.Int64  // announced reads that have not queued a record
	wake     chan struct{} // a read ended without a record: stop lingering
}

// auditExpectation is one announced read; see auditBatcher.expect.
type auditExpectation struct {
	b    *auditBatcher
	open bool
}

// expect announces a read that is about to write an access record. Call
// done once the read is over; write ends the announcement when it queues
// the record.
func (b *auditBatcher) expect() *auditExpectation {
	b.expected.Add(1)
	return &auditExpectation{b: b, open: true}
}

// done ends the announcement if write has not.
func (e *auditExpectation) done() { e.end(true) }

// end ends the announcement once. With wake, a batch lingering for it is
// told to stop when no announced read is left; write ends it without,
// since the record it is about to queue is what the batch waits for (a
// wake-up could end the linger just before the record arrives).
func (e *auditExpectation) end(wake bool) {
	if e == nil || !e.open {
		return
	}
	e.open = false
	if e.b.expected.Add(-1) == 0 && wake {
		select { // a lingering batch waits for nothing more
		case e.b.wake <- struct{}{}:
		default:
		}
	}
}

type auditWrite struct {
	puts []*pendingPut // one access: its audit record and activity markers
	done chan error
}

func newAuditBatcher(kv KV, stop <-chan struct{}, linger time.Duration) *auditBatcher {
	return &auditBatcher{kv: kv, reqs: make(chan *auditWrite, maxAuditBatch), stop: stop, linger: linger,
		wake: make(chan struct{}, 1)}
}

// write queues puts, for the read exp announced, and waits until the
// batch holding them is durable.
func (b *auditBatcher) write(ctx context.Context, exp *auditExpectation, puts []*pendingPut) error {
	w := &auditWrite{puts: puts, done: make(chan error, 1)}
	exp.end(false) // before the send: a lingering batch that takes w must not wait for it
	select {
	case b.reqs <- w:
	case <-b.stop:
		return fmt.Errorf("%w: %w", ErrAuditUnavailable, errStoreClosed)
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-w.done:
		return err
	case <-b.stop: // a record queued as the batcher stopped is never answered
		return fmt.Errorf("%w: %w", ErrAuditUnavailable, errStoreClosed)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run writes batches until stop is closed, then fails what is left.
func (b *auditBatcher) run() {
	batch := make([]*auditWrite, 0, maxAuditBatch)
	timer := time.NewTimer(0)
	<-timer.C
	for {
		select {
		case <-b.stop:
			b.failQueued()
			return
		case w := <-b.reqs:
			batch = append(batch[:0], w)
		}
	gather:
		for len(batch) < maxAuditBatch {
			select {
			case w := <-b.reqs:
				batch = append(batch, w)
			default:
				break gather
			}
		}
		if b.linger > 0 && b.expected.Load() > 0 && len(batch) < maxAuditBatch {
			timer.Reset(b.linger)
		linger:
			for len(batch) < maxAuditBatch && b.expected.Load() > 0 {
				select {
				case w := <-b.reqs:
					batch = append(batch, w)
				case <-timer.C:
					break linger
				case <-b.wake: // the loop condition decides
				case <-b.stop:
					break linger // the batch is written; what follows is failed
				}
			}
			timer.Stop()
		}
		// reads wait for their records: these may use the engine's space
		// reserve, so reads go on while a nearly full disk refuses writes
		err := b.kv.Update(kv.WithSpaceReserve(context.Background()), func(tx Writer) error {
			for _, w := range batch {
				for _, p := range w.puts {
					if err := p.put(tx); err != nil {
						return err
					}
				}
			}
			return nil
		})
		for _, w := range batch {
			w.done <- err
		}
		clear(batch)
	}
}

func (b *auditBatcher) failQueued() {
	for {
		select {
		case w := <-b.reqs:
			w.done <- fmt.Errorf("%w: %w", ErrAuditUnavailable, errStoreClosed)
		default:
			return
		}
	}
}
